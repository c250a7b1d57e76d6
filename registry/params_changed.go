package registry

// ParamsWatcher is implemented by layers that keep values derived from
// their parameters between forward passes, such as weights packed for the
// GEMM kernels. Parameters are written in place (through the tensors
// Params lists), which a layer cannot see; whoever writes them after the
// layer ran calls ParamsChanged before the next pass, and the layer drops
// what it derived. A model's Init, LoadStateDict and LoadWeights call it
// on every layer, and models.Model.ParamsChanged does for a caller's own
// writes. ParamsChanged must not run concurrently with a pass.
type ParamsWatcher interface {
	Layer
	// ParamsChanged drops every value derived from the parameters.
	ParamsChanged()
}
