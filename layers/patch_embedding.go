package layers

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
)

// PatchEmbedding is nn.patch_embedding, a vision transformer's embeddings:
// square images (B, channels, image_size, image_size) are cut into
// patch_size × patch_size patches, each projected to d_out by a Conv2d
// whose stride is its kernel, in row-major patch order; a learned CLS
// token may come first and learned position embeddings may be added,
// giving (B, T, d_out) with T = (image_size/patch_size)² (+1 with the CLS
// token). It equals Hugging Face's ViTEmbeddings in eval mode without
// position interpolation; the parameters carry its names below
// embeddings.
type PatchEmbedding struct {
	// Channels is the number of image channels (3 for RGB).
	Channels int `yaml:"channels"`
	// ImageSize is the height and width of the images, a multiple of
	// patch_size.
	ImageSize int `yaml:"image_size"`
	// PatchSize is the height and width of a patch: the Conv2d's kernel
	// and stride.
	PatchSize int `yaml:"patch_size"`
	// DOut is the width of each token.
	DOut int `yaml:"d_out"`
	// CLSToken puts a learned token before the patches.
	CLSToken bool `yaml:"cls_token"`
	// Positions adds a learned embedding to every token, the CLS token
	// included.
	Positions bool `yaml:"positions"`

	p *patchParams
}

func init() {
	registry.Register(registry.Info{
		ID: "nn.patch_embedding",
		Summary: "images (B, C, H, W) to patch tokens: a Conv2d with stride = kernel, flattened, " +
			"with an optional CLS token in front and learned positions (ViT's embeddings)",
		New: func() registry.Layer { return &PatchEmbedding{} },
	})
}

// patchParams are the layer's parameters: the Conv2d's weight (d_out,
// channels, patch, patch) and bias, and the optional CLS token (1, 1,
// d_out) and positions (1, T, d_out).
type patchParams struct {
	weight, bias, cls, positions *tensor.Dense
}

var (
	_ registry.Provisioner  = (*PatchEmbedding)(nil)
	_ registry.OutputShaper = (*PatchEmbedding)(nil)
	_ registry.FLOPCounter  = (*PatchEmbedding)(nil)
)

// Validate checks the sizes and allocates the zeroed parameters.
func (e *PatchEmbedding) Validate() error { return e.Provision(nil) }

// PlanParams lists the parameters without allocating them.
func (e *PatchEmbedding) PlanParams() ([]registry.ParamShape, error) { return planParams(e.prepare) }

// Provision checks the sizes and allocates the zeroed parameters from mem.
func (e *PatchEmbedding) Provision(mem registry.Memory) (err error) {
	e.p, err = provision(mem, e.prepare)
	return err
}

func (e *PatchEmbedding) prepare(a paramAlloc) (*patchParams, error) {
	if err := firstError(positive("channels", e.Channels), positive("image_size", e.ImageSize),
		positive("patch_size", e.PatchSize), positive("d_out", e.DOut)); err != nil {
		return nil, err
	}
	if e.ImageSize%e.PatchSize != 0 {
		return nil, fmt.Errorf("patch_size %d does not divide image_size %d", e.PatchSize, e.ImageSize)
	}
	if e.ImageSize > maxElements/e.ImageSize {
		return nil, fmt.Errorf("image_size %d is over the size limit", e.ImageSize)
	}
	p := &patchParams{}
	var err error
	set := func(dst **tensor.Dense, name string, shape ...int) {
		if err == nil {
			*dst, err = a.zeros(name, shape...)
		}
	}
	set(&p.weight, "patch_embeddings.projection.weight", e.DOut, e.Channels, e.PatchSize, e.PatchSize)
	set(&p.bias, "patch_embeddings.projection.bias", e.DOut)
	if e.CLSToken {
		set(&p.cls, "cls_token", 1, 1, e.DOut)
	}
	if e.Positions {
		set(&p.positions, "position_embeddings", 1, e.tokens(), e.DOut)
	}
	return p, err
}

// grid is the number of patches along each side.
func (e *PatchEmbedding) grid() int { return e.ImageSize / e.PatchSize }

// tokens is T, the patches and the CLS token.
func (e *PatchEmbedding) tokens() int {
	if e.CLSToken {
		return e.grid()*e.grid() + 1
	}
	return e.grid() * e.grid()
}

// Params lists the Conv2d's weight and bias, initialized as nn.Conv2d
// (uniform in ±1/√fan_in), the CLS token and the positions, N(0, 0.02) as
// ViT draws them.
func (e *PatchEmbedding) Params() []registry.Param {
	if e.p == nil {
		return nil
	}
	fanIn := e.Channels * e.PatchSize * e.PatchSize
	params := []registry.Param{
		{Name: "patch_embeddings.projection.weight", Value: e.p.weight, Init: registry.LinearInit(fanIn)},
		{Name: "patch_embeddings.projection.bias", Value: e.p.bias, Init: registry.LinearBiasInit(fanIn)},
	}
	if e.p.cls != nil {
		params = append(params, registry.Param{Name: "cls_token", Value: e.p.cls, Init: registry.NormalInit(0, 0.02)})
	}
	if e.p.positions != nil {
		params = append(params, registry.Param{Name: "position_embeddings", Value: e.p.positions, Init: registry.NormalInit(0, 0.02)})
	}
	return params
}

// Forward embeds float32 images (B, channels, image_size, image_size) as
// tokens (B, T, d_out).
func (e *PatchEmbedding) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if e.p == nil {
		return nil, errNotValidated
	}
	if len(inputs) != 1 || inputs[0] == nil {
		return nil, fmt.Errorf("takes 1 input, images (B, %d, %d, %d)", e.Channels, e.ImageSize, e.ImageSize)
	}
	shape, err := e.OutputShape([]tensor.Shape{inputs[0].Shape()})
	if err != nil {
		return nil, err
	}
	if inputs[0].Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("images have dtype %v: want float32", inputs[0].Dtype())
	}
	x, err := rowMajor("images", inputs[0])
	if err != nil {
		return nil, err
	}
	out, data := run.Lender().Float32(shape...)
	e.embed(floats(x), data, shape[0])
	return out, nil
}

// embed writes the tokens of batch images pixels into out: each image's
// patches gathered as rows of the weight's (channel, row, column) order,
// projected by one kernels.Linear.
func (e *PatchEmbedding) embed(pixels, out []float32, batch int) {
	c, s, k, d, g := e.Channels, e.ImageSize, e.PatchSize, e.DOut, e.grid()
	first, T, width := 0, e.tokens(), c*k*k
	if e.CLSToken {
		first = 1
	}
	patches := make([]float32, g*g*width)
	for b := range batch {
		image := pixels[b*c*s*s : (b+1)*c*s*s]
		tokens := out[b*T*d : (b+1)*T*d]
		if e.CLSToken {
			copy(tokens[:d], floats(e.p.cls))
		}
		for py := range g {
			for px := range g {
				patch := patches[(py*g+px)*width:][:width]
				for ch := range c {
					for i := range k {
						row := image[ch*s*s+(py*k+i)*s+px*k:]
						copy(patch[(ch*k+i)*k:(ch*k+i+1)*k], row[:k])
					}
				}
			}
		}
		kernels.Linear(tokens[first*d:], patches, floats(e.p.weight), floats(e.p.bias), g*g, width, d)
		if e.Positions {
			for i, p := range floats(e.p.positions) {
				tokens[i] += p
			}
		}
	}
}

// OutputShape is (B, T, d_out) for images (B, channels, image_size,
// image_size).
func (e *PatchEmbedding) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	in := inputs[0]
	if len(in) != 4 || in[0] <= 0 || in[1] != e.Channels || in[2] != e.ImageSize || in[3] != e.ImageSize {
		return nil, fmt.Errorf("images of shape %s: want (B, %d, %d, %d), channels and image_size",
			fmtShape(in), e.Channels, e.ImageSize, e.ImageSize)
	}
	if in[0] > maxElements/(e.tokens()*e.DOut) {
		return nil, fmt.Errorf("images of shape %s: the tokens would exceed the output size limit", fmtShape(in))
	}
	return tensor.Shape{in[0], e.tokens(), e.DOut}, nil
}

// FLOPs counts the Conv2d's multiply-adds, 2 per weight per patch.
func (e *PatchEmbedding) FLOPs(inputs []tensor.Shape) (int64, error) {
	shape, err := e.OutputShape(inputs)
	if err != nil {
		return 0, err
	}
	patches := int64(shape[0]) * int64(e.grid()*e.grid())
	return 2 * patches * int64(e.DOut) * int64(e.Channels*e.PatchSize*e.PatchSize), nil
}
