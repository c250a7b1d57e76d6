package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	front "github.com/attnrun/attnrun" // the front package (attnrun is a test helper here)
)

type generateFlags struct {
	ids          string
	maxNewTokens int
	eos          int64
	weights      string
	seed         uint64
	executor     bool
}

func newGenerateCommand() *cobra.Command {
	var f generateFlags
	cmd := &cobra.Command{
		Use:   "generate MODEL.yaml|FILE.onnx --ids 1,2,3",
		Short: "Continue token ids by greedy decoding with a KV cache",
		Long: `generate continues a prompt of token ids (--ids) by greedy decoding, as
Hugging Face's generate(do_sample=False) does: at every step it appends the id
with the largest logit and feeds it back, for --max-new-tokens steps or until
the model picks --eos. It prints the prompt and the new ids, comma-separated,
as --ids takes them.

Each step computes only the new token, through a KV cache:
  - an ONNX decoder exported with its cache (Hugging Face's layout: inputs
    input_ids, attention_mask, position_ids when it has them and
    past_key_values.N.key/value; outputs logits and present.N.key/value)
    runs on attnrun's graph executor, each step's present fed back as the
    next step's past, starting from an empty cache (a decoder exported
    without its cache runs on the whole sequence at every step);
  - a model of attnrun layers (a config, or a file attnrun wrote) whose one
    input is int64 token ids and whose output is logits steps through its
    layers' caches (models.Model.Step). A config's weights come from
    --weights, else a seeded initialization (--seed).`,
		Example: `  attnrun generate decoder.onnx --ids 1,2,3 --max-new-tokens 20
  attnrun generate decoder.onnx --ids 1,2,3 --max-new-tokens 20 --eos 2
  attnrun generate lm.yaml --weights lm.safetensors --ids 5 --max-new-tokens 8`,
		Args: oneArg("a model config or an ONNX decoder"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lim.run(func() error { return generate(cmd, args[0], f, lim) })
	}
	fl := cmd.Flags()
	fl.StringVar(&f.ids, "ids", "", "the prompt: comma-separated token ids, e.g. 1,2,3")
	fl.IntVar(&f.maxNewTokens, "max-new-tokens", 20, "the most ids to add")
	fl.Int64Var(&f.eos, "eos", -1, "stop after this id (it is printed); negative: never stop early")
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with a config's parameters")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for a config's weight initialization when --weights is not given")
	fl.BoolVar(&f.executor, "executor", false, "run a file attnrun wrote on its ONNX graph, not on attnrun's layers")
	return cmd
}

func generate(cmd *cobra.Command, target string, f generateFlags, lim *limits) error {
	prompt, err := parseIDs(f.ids)
	if err != nil {
		return usageError{err}
	}
	if f.maxNewTokens <= 0 {
		return usageError{fmt.Errorf("--max-new-tokens must be positive, got %d", f.maxNewTokens)}
	}
	opts := []front.Option{front.WithMaxMemory(int64(lim.maxMemory))}
	if f.executor {
		opts = append(opts, front.WithExecutor())
	}
	kind, err := resolveModel(target)
	if err != nil {
		return err
	}
	if kind == modelConfig {
		if f.weights != "" {
			opts = append(opts, front.WithWeights(f.weights))
		} else {
			opts = append(opts, front.WithSeed(f.seed))
		}
	} else if f.weights != "" {
		return usageError{fmt.Errorf("--weights applies to a model config; %s carries its own weights", target)}
	}
	m, err := front.Load(target, opts...)
	if err != nil {
		return err
	}
	for _, w := range m.Warnings() {
		fmt.Fprintf(cmd.ErrOrStderr(), "attnrun: warning: %s\n", w)
	}
	gen := front.GenerateOptions{MaxNewTokens: f.maxNewTokens}
	if f.eos >= 0 {
		gen.EOS = &f.eos
	}
	out, err := m.Generate(lim.ctx, prompt, gen)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), formatIDs(append(prompt, out.IDs...)))
	return nil
}

// parseIDs reads --ids: comma-separated non-negative integers.
func parseIDs(s string) ([]int64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--ids is required: the prompt's token ids, e.g. --ids 1,2,3")
	}
	fields := strings.Split(s, ",")
	ids := make([]int64, len(fields))
	for i, field := range fields {
		id, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--ids: %q is not a token id (want comma-separated non-negative integers)", field)
		}
		ids[i] = id
	}
	return ids, nil
}

// formatIDs writes ids as --ids takes them.
func formatIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}
