package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/torchrand"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/tensorio"
)

func newInputCommand() *cobra.Command {
	var seed uint64
	var output string
	cmd := &cobra.Command{
		Use:   "input SHAPE -o X.npy [--seed N]",
		Short: "Write a seeded random input tensor (torch.randn) as .npy",
		Long: `input writes a float32 tensor of standard normal values to a .npy file: the
numbers torch.randn(SHAPE) gives after torch.manual_seed(N), so that PyTorch
can be fed the same input. SHAPE is the sizes separated by commas: B,T,D
(batch, tokens, width) or T,D.`,
		Example: `  attnrun input 1,6,3 -o x.npy
  attnrun run model.yaml --seed 1 --input x.npy
  attnrun input 2,16,64 --seed 7 -o batch.npy`,
		Args: oneArg("the shape, e.g. 1,6,3"),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if output == "" {
			return usageError{fmt.Errorf("input needs the file to write: -o x.npy")}
		}
		x, err := torchRandn(args[0], seed, torchrand.New(seed))
		if err != nil {
			return err
		}
		if err := tensorio.WriteNPYFile(output, x); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: float32 %s, torch.randn after torch.manual_seed(%d)\n", output, models.FormatShape(x.Shape()), seed)
		return nil
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the .npy file to write (required)")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "torch.manual_seed of the values")
	return cmd
}

// maxRandomInput bounds a random input (256 MiB of float32): a typo in
// the shape fails fast instead of filling the memory.
const maxRandomInput = 1 << 26

// torchRandn draws a float32 tensor of the shape "B,T,D" (any rank) from
// g as torch.randn draws it.
func torchRandn(spec string, seed uint64, g *torchrand.Generator) (*tensor.Dense, error) {
	bad := func(why string) error {
		return usageError{fmt.Errorf("shape %q: %s; want sizes separated by commas, e.g. 1,6,3 for (B, T, D)", spec, why)}
	}
	var shape []int
	for _, part := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			return nil, bad(fmt.Sprintf("%q is not a positive size", part))
		}
		shape = append(shape, n)
	}
	if n := budget.Elements(shape); n < 0 || n > maxRandomInput {
		return nil, bad(fmt.Sprintf("more than %d values", maxRandomInput))
	}
	data := make([]float32, budget.Elements(shape))
	if err := g.Normal(data, 0, 1); err != nil {
		return nil, fmt.Errorf("random input, seed %d: %w", seed, err)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), nil
}
