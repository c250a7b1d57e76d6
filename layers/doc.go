// Package layers holds attnrun's built-in layers: the attention mechanisms of
// the seed notebooks and the small nn.* pieces needed to assemble them from a
// model config. Each layer registers itself with the registry in init, so a
// blank import makes all of them available by ID:
//
//	import _ "github.com/attnrun/attnrun/layers"
//
// A layer type is also its own configuration: exported fields carry the yaml
// tags of the model config, Validate checks them and allocates the
// parameters (zeroed, named and ordered as PyTorch's state_dict), and
// Forward runs the layer on float32 (T, d) or (B, T, d) tensors, returning
// the rank it was given. Forward uses the configuration as of the last
// successful Validate and never modifies the layer, so one layer can serve
// concurrent passes.
//
// Attention layers hand their weights to the Run's hook, if one is set, as a
// (B, H, T, T) tensor (B = 1 for a (T, d) input, H = 1 for single-head
// layers); without a hook the weights are never materialized.
package layers
