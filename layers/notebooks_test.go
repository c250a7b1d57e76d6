package layers

import (
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// The notebooks print 4 decimals, so their numbers are off by up to 5e-5.
const printedTol = 5e-5

// journey is the 6x3 "Your journey starts with one step" input of
// notebooks 000, 003 and 004.
var journey = [][]float32{
	{0.43, 0.15, 0.89},
	{0.55, 0.87, 0.66},
	{0.57, 0.85, 0.64},
	{0.22, 0.58, 0.33},
	{0.77, 0.25, 0.10},
	{0.05, 0.80, 0.55},
}

// sentence is the 5x3 "This is an example sentence" input of notebook 001.
var sentence = [][]float32{
	{0.5341, 0.3316, 0.5995},
	{0.9891, 0.8921, 0.4602},
	{0.1234, 0.5678, 0.9101},
	{0.4567, 0.7890, 0.1234},
	{0.2345, 0.6789, 0.3456},
}

// loader fills a validated layer's parameters.
type loader func(t *testing.T, l registry.Layer)

// fromCase loads a torch_cases.json state dict.
func fromCase(name, prefix string) loader {
	return func(t *testing.T, l registry.Layer) {
		setParams(t, l, torchCaseNamed(t, name).Params, prefix)
	}
}

// transposedFromCase loads a case's bare (d_in, d_out) matrices into
// nn.Linear weights (d_out, d_in), as notebook 000 In[48] does with
// `.data.T.clone()`.
func transposedFromCase(name string) loader {
	return func(t *testing.T, l registry.Layer) {
		require.NoError(t, l.Validate())
		sd := torchCaseNamed(t, name).Params
		for _, p := range l.Params() {
			m := sd.Values[p.Name[:len(p.Name)-len(".weight")]]
			tr := newDense(m.Shape, append([]float32(nil), m.Data...))
			require.NoError(t, tr.T())
			require.NoError(t, tr.Transpose())
			require.Equal(t, tr.Shape(), p.Value.Shape(), p.Name)
			copy(floats(p.Value), floats(tr))
		}
	}
}

// stage is one layer of a chain, with where its parameters come from.
type stage struct {
	layer registry.Layer
	load  loader // nil for layers without parameters
}

// TestNotebookPrintouts checks the layers against the tensors the seed
// notebooks print.
func TestNotebookPrintouts(t *testing.T) {
	tests := []struct {
		name        string
		chain       []stage
		input       *tensor.Dense
		want        [][]float32 // output rows; nil if the notebook prints none
		wantWeights [][]float32 // attention weights (T, T); nil if not printed
	}{
		{
			name:  "000 In[17] simple attention all_context_vecs, In[14] weights",
			chain: []stage{{layer: &Simple{}}},
			input: matrix(journey),
			want: [][]float32{
				{0.4421, 0.5931, 0.5790},
				{0.4419, 0.6515, 0.5683},
				{0.4431, 0.6496, 0.5671},
				{0.4304, 0.6298, 0.5510},
				{0.4671, 0.5910, 0.5266},
				{0.4177, 0.6503, 0.5645},
			},
			wantWeights: [][]float32{
				{0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452},
				{0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581},
				{0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565},
				{0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720},
				{0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295},
				{0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896},
			},
		},
		{
			name:  "001 In[3] simple attention Y and A",
			chain: []stage{{layer: &Simple{}}},
			input: matrix(sentence),
			want: [][]float32{
				{0.5150, 0.6652, 0.5058},
				{0.5899, 0.7082, 0.4736},
				{0.4698, 0.6529, 0.5333},
				{0.5335, 0.6919, 0.4664},
				{0.5016, 0.6750, 0.4882},
			},
			wantWeights: [][]float32{
				{0.1953, 0.2759, 0.2044, 0.1640, 0.1604},
				{0.1564, 0.3793, 0.1484, 0.1750, 0.1410},
				{0.1822, 0.2334, 0.2628, 0.1517, 0.1698},
				{0.1578, 0.2971, 0.1637, 0.2060, 0.1754},
				{0.1679, 0.2605, 0.1993, 0.1908, 0.1815},
			},
		},
		{
			name: "003 In[15] self-attention with torch.randn matrices seed 1, In[13] weights",
			chain: []stage{{
				layer: &Self{DIn: 3, DOut: 2, Weights: "matrix", Scaled: true},
				load:  fromCase("randn1", ""),
			}},
			input: matrix(journey),
			want: [][]float32{
				{-0.0617, -0.5368},
				{-0.0702, -0.5428},
				{-0.0700, -0.5419},
				{-0.0666, -0.5399},
				{-0.0648, -0.5218},
				{-0.0678, -0.5489},
			},
			wantWeights: [][]float32{
				{0.1666, 0.1734, 0.1735, 0.1598, 0.1663, 0.1605},
				{0.1835, 0.1500, 0.1513, 0.1683, 0.1941, 0.1529},
				{0.1837, 0.1487, 0.1500, 0.1695, 0.1944, 0.1537},
				{0.1767, 0.1590, 0.1599, 0.1654, 0.1826, 0.1565},
				{0.1812, 0.1306, 0.1316, 0.1919, 0.1919, 0.1729},
				{0.1750, 0.1718, 0.1727, 0.1536, 0.1795, 0.1475},
			},
		},
		{
			name:  "002 In[12] causal average c = a @ b",
			chain: []stage{{layer: &Average{}}},
			input: matrix([][]float32{{2, 7}, {6, 4}, {6, 5}}),
			want:  [][]float32{{2, 7}, {4, 5.5}, {4.6667, 5.3333}},
			wantWeights: [][]float32{
				{1, 0, 0},
				{0.5, 0.5, 0},
				{0.3333, 0.3333, 0.3333},
			},
		},
		{
			name:  "000 In[36] / 004 In[89] SelfAttention_v1, torch.rand seed 123",
			chain: []stage{{layer: &Self{DIn: 3, DOut: 2, Weights: "matrix", Scaled: true}, load: fromCase("rand123", "")}},
			input: matrix(journey),
			want: [][]float32{
				{0.2996, 0.8053},
				{0.3061, 0.8210},
				{0.3058, 0.8203},
				{0.2948, 0.7939},
				{0.2927, 0.7891},
				{0.2990, 0.8040},
			},
		},
		{
			name:  "000 In[48] SelfAttention_v2 with v1's weights transposed, In[49] weights",
			chain: []stage{{layer: &Self{DIn: 3, DOut: 2, Weights: "linear", Scaled: true}, load: transposedFromCase("rand123")}},
			input: matrix(journey),
			want: [][]float32{
				{0.2996, 0.8053},
				{0.3061, 0.8210},
				{0.3058, 0.8203},
				{0.2948, 0.7939},
				{0.2927, 0.7891},
				{0.2990, 0.8040},
			},
			wantWeights: [][]float32{
				{0.1551, 0.2104, 0.2059, 0.1413, 0.1074, 0.1799},
				{0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820},
				{0.1503, 0.2256, 0.2192, 0.1315, 0.0914, 0.1819},
				{0.1591, 0.1994, 0.1962, 0.1477, 0.1206, 0.1769},
				{0.1610, 0.1949, 0.1923, 0.1501, 0.1265, 0.1752},
				{0.1557, 0.2092, 0.2048, 0.1419, 0.1089, 0.1794},
			},
		},
		{
			name: "000 In[57] masked attention weights (attention.causal)",
			chain: []stage{{
				layer: &Causal{DIn: 3, DOut: 2, ContextLength: 6},
				load:  transposedFromCase("rand123"),
			}},
			input:       matrix(journey),
			wantWeights: maskedWeights57,
		},
		{
			name: "000 In[57] masked attention weights (attention.self causal, matrix)",
			chain: []stage{{
				layer: &Self{DIn: 3, DOut: 2, Weights: "matrix", Scaled: true, Causal: true},
				load:  fromCase("rand123", ""),
			}},
			input:       matrix(journey),
			wantWeights: maskedWeights57,
		},
		{
			name:  "000 In[47] SelfAttention_v2 seed 789",
			chain: []stage{{layer: &Self{DIn: 3, DOut: 2, Weights: "linear", Scaled: true}, load: fromCase("linear789", "")}},
			input: matrix(journey),
			want: [][]float32{
				{-0.0739, 0.0713},
				{-0.0748, 0.0703},
				{-0.0749, 0.0702},
				{-0.0760, 0.0685},
				{-0.0763, 0.0679},
				{-0.0754, 0.0693},
			},
		},
		{
			name:  "004 In[95] SelfAttention_v2 seed 123",
			chain: []stage{{layer: &Self{DIn: 3, DOut: 2, Weights: "linear", Scaled: true}, load: fromCase("linear123", "")}},
			input: matrix(journey),
			want: [][]float32{
				{-0.5337, -0.1051},
				{-0.5323, -0.1080},
				{-0.5323, -0.1079},
				{-0.5297, -0.1076},
				{-0.5311, -0.1066},
				{-0.5299, -0.1081},
			},
		},
		{
			name: "000 In[66] MultiHeadAttentionWrapper seed 123, batch of two",
			chain: []stage{{
				layer: &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2},
				load:  fromCase("wrapper123", ""),
			}},
			input: newDense([]int{2, 6, 3}, append(floats(matrix(journey)), floats(matrix(journey))...)),
			want:  append(wrapperRows66, wrapperRows66...),
		},
		{
			name:  "001 In[4] SelfAttentionV1 (nn.Linear) seed 239",
			chain: []stage{{layer: &Self{DIn: 3, DOut: 3, Weights: "linear", Scaled: true}, load: fromCase("bishop_self", "")}},
			input: matrix(sentence),
			want: [][]float32{
				{0.3362, -0.4088, 0.2517},
				{0.3290, -0.4012, 0.2486},
				{0.3344, -0.4069, 0.2510},
				{0.3276, -0.3996, 0.2480},
				{0.3299, -0.4021, 0.2490},
			},
			wantWeights: [][]float32{
				{0.1981, 0.1991, 0.2002, 0.2013, 0.2013},
				{0.2040, 0.1963, 0.2096, 0.1923, 0.1977},
				{0.2006, 0.2032, 0.2054, 0.1943, 0.1965},
				{0.2070, 0.1984, 0.2124, 0.1877, 0.1944},
				{0.2051, 0.2005, 0.2102, 0.1895, 0.1947},
			},
		},
		{
			name: "001 In[5] position embedding then self-attention",
			chain: []stage{
				{layer: &LearnedPosition{ContextLength: 5, D: 3}, load: fromCase("bishop_positional", "position.")},
				{layer: &Self{DIn: 3, DOut: 3, Weights: "linear", Scaled: true}, load: fromCase("bishop_positional", "attn.")},
			},
			input: matrix(sentence),
			want: [][]float32{
				{0.0295, 0.0785, 0.1139},
				{0.0946, 0.1900, 0.1150},
				{-0.2950, 0.1823, -0.1397},
				{-0.0281, 0.0799, 0.0833},
				{-0.2052, 0.1193, -0.0484},
			},
			wantWeights: [][]float32{
				{0.1458, 0.0471, 0.2460, 0.2505, 0.3105},
				{0.0947, 0.0834, 0.3150, 0.1842, 0.3226},
				{0.2007, 0.4527, 0.0939, 0.1501, 0.1026},
				{0.1880, 0.0915, 0.2341, 0.2317, 0.2547},
				{0.2253, 0.2973, 0.1442, 0.1847, 0.1486},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chain []registry.Layer
			for _, s := range tt.chain {
				if s.load != nil {
					s.load(t, s.layer)
				} else {
					require.NoError(t, s.layer.Validate())
				}
				chain = append(chain, s.layer)
			}
			out, weights := forward(t, tt.input, chain...)
			if tt.want != nil {
				assertClose(t, floats(matrix(tt.want)), floats(out), printedTol, 0, "output")
			}
			if tt.wantWeights != nil {
				require.NotNil(t, weights, "the hook received no weights")
				n := len(tt.wantWeights)
				require.Equal(t, tensor.Shape{1, 1, n, n}, weights.Shape())
				assertClose(t, floats(matrix(tt.wantWeights)), floats(weights), printedTol, 0, "weights")
			}
		})
	}
}

// maskedWeights57 is the causal attention weights notebook 000 prints in In[57].
var maskedWeights57 = [][]float32{
	{1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000},
	{0.3986, 0.6014, 0.0000, 0.0000, 0.0000, 0.0000},
	{0.2526, 0.3791, 0.3683, 0.0000, 0.0000, 0.0000},
	{0.2265, 0.2839, 0.2794, 0.2103, 0.0000, 0.0000},
	{0.1952, 0.2363, 0.2331, 0.1820, 0.1534, 0.0000},
	{0.1557, 0.2092, 0.2048, 0.1419, 0.1089, 0.1794},
}

// wrapperRows66 is one sequence of the batch notebook 000 prints in In[66].
var wrapperRows66 = [][]float32{
	{-0.4519, 0.2216, 0.4772, 0.1063},
	{-0.5874, 0.0058, 0.5891, 0.3257},
	{-0.6300, -0.0632, 0.6202, 0.3860},
	{-0.5675, -0.0843, 0.5478, 0.3589},
	{-0.5526, -0.0981, 0.5321, 0.3428},
	{-0.5299, -0.1081, 0.5077, 0.3493},
}

// TestNotebook003Matrices ties the randn1 case to notebook 003: its
// matrices are the ones In[4..6] print. (The printed 4-decimal matrices
// themselves are too coarse to reproduce the printed outputs to 5e-5.)
func TestNotebook003Matrices(t *testing.T) {
	printed := map[string][][]float32{
		"W_query": {{0.6614, 0.2669}, {0.0617, 0.6213}, {-0.4519, -0.1661}},
		"W_key":   {{-1.5228, 0.3817}, {-1.0276, -0.5631}, {-0.8923, -0.0583}},
		"W_value": {{-0.1955, -0.9656}, {0.4224, 0.2673}, {-0.4212, -0.5107}},
	}
	sd := torchCaseNamed(t, "randn1").Params
	require.Equal(t, []string{"W_query", "W_key", "W_value"}, sd.Names)
	for name, rows := range printed {
		assertClose(t, floats(matrix(rows)), sd.Values[name].Data, printedTol, 0, name)
	}
}
