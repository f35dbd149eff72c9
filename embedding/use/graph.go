package use

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// This file reads a TensorFlow.js graph model (model.json and its weight shards) into
// an executable plan: the GraphDef nodes the output depends on, in topological order,
// with their attributes decoded and their constants loaded.

// modelJSON is the part of a TensorFlow.js model.json this package reads.
type modelJSON struct {
	Format        string `json:"format"`
	ModelTopology struct {
		Node []nodeJSON `json:"node"`
	} `json:"modelTopology"`
	WeightsManifest []struct {
		Paths   []string     `json:"paths"`
		Weights []weightJSON `json:"weights"`
	} `json:"weightsManifest"`
}

type nodeJSON struct {
	Name  string              `json:"name"`
	Op    string              `json:"op"`
	Input []string            `json:"input"`
	Attr  map[string]attrJSON `json:"attr"`
}

type attrJSON struct {
	Type   json.RawMessage `json:"type"`
	I      json.RawMessage `json:"i"`
	F      json.RawMessage `json:"f"`
	B      *bool           `json:"b"`
	S      json.RawMessage `json:"s"`
	List   *listJSON       `json:"list"`
	Tensor *tensorJSON     `json:"tensor"`
}

type listJSON struct {
	I []json.RawMessage `json:"i"`
}

type tensorJSON struct {
	Dtype       json.RawMessage `json:"dtype"`
	TensorShape struct {
		Dim []struct {
			Size json.RawMessage `json:"size"`
		} `json:"dim"`
	} `json:"tensorShape"`
	IntVal   []json.RawMessage `json:"intVal"`
	Int64Val []json.RawMessage `json:"int64Val"`
	FloatVal []float64         `json:"floatVal"`
	BoolVal  []bool            `json:"boolVal"`
}

type weightJSON struct {
	Name         string `json:"name"`
	Shape        []int  `json:"shape"`
	Dtype        string `json:"dtype"`
	Quantization *struct {
		Dtype         string  `json:"dtype"`
		Scale         float64 `json:"scale"`
		Min           float64 `json:"min"`
		OriginalDtype string  `json:"original_dtype"`
	} `json:"quantization"`
}

// node is one GraphDef node, ready to run.
type node struct {
	name   string
	op     string
	inputs []ref
	fn     opFunc
	value  *tensor // Const
	// attributes used by the ops
	attrI     map[string]int
	attrB     map[string]bool
	attrS     map[string]string
	attrList  map[string][]int
	attrDtype map[string]dtype
}

// ref names output out of node (plan index) node.
type ref struct{ node, out int }

func (n *node) int(name string) int   { return n.attrI[name] }
func (n *node) bool(name string) bool { return n.attrB[name] }

// graph is the executable plan.
type graph struct {
	nodes   []*node // topological order
	inputs  map[string]int
	output  int
	uses    []int // number of inputs that read each node, to free intermediates
	weights int   // bytes of constants held
}

// rawInt parses a JSON number that protobuf's JSON form may write as a string.
func rawInt(r json.RawMessage) (int, error) {
	s := strings.Trim(string(r), `"`)
	v, err := strconv.ParseInt(s, 10, 64)
	return int(v), err
}

// rawDtype parses a DataType written as a number (1) or a name ("DT_FLOAT").
func rawDtype(r json.RawMessage) (dtype, error) {
	s := strings.Trim(string(r), `"`)
	switch s {
	case "1", "DT_FLOAT":
		return dtFloat, nil
	case "3", "9", "DT_INT32", "DT_INT64":
		return dtInt, nil
	case "10", "DT_BOOL":
		return dtBool, nil
	}
	return 0, fmt.Errorf("unsupported data type %s", s)
}

// rawBytes parses a protobuf bytes field, written base64 or as an array of bytes.
func rawBytes(r json.RawMessage) (string, error) {
	if len(r) > 0 && r[0] == '[' {
		var bs []byte
		var ns []int
		if err := json.Unmarshal(r, &ns); err != nil {
			return "", err
		}
		for _, n := range ns {
			bs = append(bs, byte(n))
		}
		return string(bs), nil
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		return "", err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return s, nil //nolint:nilerr // a plain string
	}
	return string(b), nil
}

// loadGraph reads dir/model.json and its weight shards.
func loadGraph(dir string) (*graph, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "model.json"))
	if err != nil {
		return nil, err
	}
	var mj modelJSON
	if err := json.Unmarshal(raw, &mj); err != nil {
		return nil, fmt.Errorf("model.json: %w", err)
	}
	if len(mj.ModelTopology.Node) == 0 {
		return nil, errors.New("model.json: no graph nodes (not a TensorFlow.js graph model)")
	}
	weights, bytesHeld, err := loadWeights(dir, &mj)
	if err != nil {
		return nil, err
	}

	byName := make(map[string]*nodeJSON, len(mj.ModelTopology.Node))
	for k := range mj.ModelTopology.Node {
		n := &mj.ModelTopology.Node[k]
		byName[n.Name] = n
	}
	// The output is the node nothing reads.
	read := map[string]bool{}
	for _, n := range mj.ModelTopology.Node {
		for _, in := range n.Input {
			read[strings.TrimPrefix(strings.SplitN(in, ":", 2)[0], "^")] = true
		}
	}
	var outputs []string
	for _, n := range mj.ModelTopology.Node {
		if !read[n.Name] && n.Op != "Const" && n.Op != "NoOp" {
			outputs = append(outputs, n.Name)
		}
	}
	if len(outputs) != 1 {
		return nil, fmt.Errorf("model.json: want one output node, found %d (%s)", len(outputs), strings.Join(outputs, ", "))
	}

	g := &graph{inputs: map[string]int{}}
	index := map[string]int{}
	state := map[string]int{} // 1 visiting, 2 done
	var unsupported []string
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("model.json: cycle at %s", name)
		case 2:
			return nil
		}
		nj := byName[name]
		if nj == nil {
			return fmt.Errorf("model.json: node %q is read but not defined", name)
		}
		state[name] = 1
		n := &node{name: name, op: nj.Op}
		for _, in := range nj.Input {
			if strings.HasPrefix(in, "^") {
				continue // control dependency: nothing to pass
			}
			src, out := in, 0
			if k := strings.LastIndexByte(in, ':'); k >= 0 {
				if v, err := strconv.Atoi(in[k+1:]); err == nil {
					src, out = in[:k], v
				}
			}
			if err := visit(src); err != nil {
				return err
			}
			n.inputs = append(n.inputs, ref{node: index[src], out: out})
		}
		if err := decodeAttrs(n, nj); err != nil {
			return fmt.Errorf("model.json: node %s: %w", name, err)
		}
		switch n.op {
		case "Const":
			if t, ok := weights[name]; ok {
				n.value = t
			} else if t, err := inlineTensor(nj); err == nil {
				n.value = t
			} else {
				return fmt.Errorf("model.json: constant %s: %w", name, err)
			}
		case "Placeholder":
			g.inputs[name] = len(g.nodes)
		default:
			n.fn = ops[n.op]
			if n.fn == nil && !slices.Contains(unsupported, n.op) {
				unsupported = append(unsupported, n.op)
			}
		}
		state[name] = 2
		index[name] = len(g.nodes)
		g.nodes = append(g.nodes, n)
		return nil
	}
	if err := visit(outputs[0]); err != nil {
		return nil, err
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("model.json: unsupported ops: %s", strings.Join(unsupported, ", "))
	}
	g.output = index[outputs[0]]
	g.uses = make([]int, len(g.nodes))
	for _, n := range g.nodes {
		for _, in := range n.inputs {
			g.uses[in.node]++
		}
	}
	g.weights = bytesHeld
	g.pretranspose()
	return g, nil
}

func decodeAttrs(n *node, nj *nodeJSON) error {
	n.attrI, n.attrB, n.attrS = map[string]int{}, map[string]bool{}, map[string]string{}
	n.attrList, n.attrDtype = map[string][]int{}, map[string]dtype{}
	for k, a := range nj.Attr {
		switch {
		case a.B != nil:
			n.attrB[k] = *a.B
		case len(a.I) > 0:
			v, err := rawInt(a.I)
			if err != nil {
				return fmt.Errorf("attr %s: %w", k, err)
			}
			n.attrI[k] = v
		case len(a.S) > 0:
			s, err := rawBytes(a.S)
			if err != nil {
				return fmt.Errorf("attr %s: %w", k, err)
			}
			n.attrS[k] = s
		case a.List != nil:
			var l []int
			for _, r := range a.List.I {
				v, err := rawInt(r)
				if err != nil {
					return fmt.Errorf("attr %s: %w", k, err)
				}
				l = append(l, v)
			}
			n.attrList[k] = l
		case len(a.Type) > 0:
			// Types of inputs the op does not need are not checked here: an op
			// checks the dtypes it reads.
			if d, err := rawDtype(a.Type); err == nil {
				n.attrDtype[k] = d
			}
		}
	}
	return nil
}

// inlineTensor decodes a small constant stored in the graph rather than the shards.
func inlineTensor(nj *nodeJSON) (*tensor, error) {
	a, ok := nj.Attr["value"]
	if !ok || a.Tensor == nil {
		return nil, errors.New("no value in the weights manifest or the graph")
	}
	dt, err := rawDtype(a.Tensor.Dtype)
	if err != nil {
		return nil, err
	}
	var shape []int
	for _, d := range a.Tensor.TensorShape.Dim {
		v, err := rawInt(d.Size)
		if err != nil {
			return nil, err
		}
		shape = append(shape, v)
	}
	t := newTensor(dt, shape)
	n := t.size()
	fill := func(k int, set func(i, j int)) error {
		switch {
		case k == n:
			for i := range n {
				set(i, i)
			}
		case k == 1:
			for i := range n {
				set(i, 0)
			}
		default:
			return fmt.Errorf("inline constant has %d values for %d elements", k, n)
		}
		return nil
	}
	switch dt {
	case dtFloat:
		vals := a.Tensor.FloatVal
		err = fill(len(vals), func(i, j int) { t.f[i] = float32(vals[j]) })
	case dtInt:
		vals := a.Tensor.IntVal
		if len(vals) == 0 {
			vals = a.Tensor.Int64Val
		}
		ints := make([]int32, len(vals))
		for k, r := range vals {
			v, err := rawInt(r)
			if err != nil {
				return nil, err
			}
			ints[k] = int32(v)
		}
		err = fill(len(ints), func(i, j int) { t.i[i] = ints[j] })
	case dtBool:
		vals := a.Tensor.BoolVal
		err = fill(len(vals), func(i, j int) { t.b[i] = vals[j] })
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// loadWeights reads every weight group: its shards concatenated hold its weights in
// manifest order. It returns the tensors by name and the bytes they hold.
func loadWeights(dir string, mj *modelJSON) (map[string]*tensor, int, error) {
	out := map[string]*tensor{}
	held := 0
	for _, group := range mj.WeightsManifest {
		var buf bytes.Buffer
		for _, p := range group.Paths {
			if strings.Contains(p, "..") || filepath.IsAbs(p) {
				return nil, 0, fmt.Errorf("model.json: weight path %q leaves the model directory", p)
			}
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil {
				return nil, 0, fmt.Errorf("weight shard: %w", err)
			}
			buf.Write(b)
		}
		data := buf.Bytes()
		off := 0
		for _, w := range group.Weights {
			n := numElements(w.Shape)
			elem := 4
			if w.Dtype == "bool" {
				elem = 1 // TensorFlow.js stores a bool in one byte
			}
			if q := w.Quantization; q != nil {
				switch q.Dtype {
				case "uint8":
					elem = 1
				case "uint16", "float16":
					elem = 2
				default:
					return nil, 0, fmt.Errorf("weight %s: unsupported quantization %q", w.Name, q.Dtype)
				}
			}
			if off+n*elem > len(data) {
				return nil, 0, fmt.Errorf("weight shards hold %d bytes, too few for weight %s at offset %d (shards truncated or corrupt)", len(data), w.Name, off)
			}
			b := data[off : off+n*elem]
			off += n * elem
			var t *tensor
			switch w.Dtype {
			case "float32":
				f := make([]float32, n)
				for i := range n {
					f[i] = dequant(w, b, i)
				}
				t = floatTensor(slices.Clone(w.Shape), f)
			case "int32":
				v := make([]int32, n)
				for i := range n {
					if w.Quantization != nil {
						v[i] = int32(math.Round(float64(dequant(w, b, i))))
					} else {
						v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
					}
				}
				t = intTensor(slices.Clone(w.Shape), v)
			case "bool":
				if w.Quantization != nil {
					return nil, 0, fmt.Errorf("weight %s: quantized bool", w.Name)
				}
				t = newTensor(dtBool, slices.Clone(w.Shape))
				for i := range n {
					t.b[i] = b[i] != 0
				}
			default:
				return nil, 0, fmt.Errorf("weight %s: unsupported dtype %q", w.Name, w.Dtype)
			}
			out[w.Name] = t
			held += n * 4
		}
		if off != len(data) {
			return nil, 0, fmt.Errorf("weight shards hold %d bytes, the manifest describes %d (shards corrupt or from another model)", len(data), off)
		}
	}
	return out, held, nil
}

func dequant(w weightJSON, b []byte, i int) float32 {
	q := w.Quantization
	if q == nil {
		return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	switch q.Dtype {
	case "uint8":
		return float32(float64(b[i])*q.Scale + q.Min)
	case "uint16":
		return float32(float64(binary.LittleEndian.Uint16(b[2*i:]))*q.Scale + q.Min)
	default: // float16
		return halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// floatToHalf rounds f to the nearest IEEE half-precision value (ties to even);
// beyond the half range it gives ±Inf.
func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	// round shifts m right by s bits, to nearest, ties to even.
	round := func(m uint32, s uint) uint32 {
		q, rem, half := m>>s, m&(1<<s-1), uint32(1)<<(s-1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return q
	}
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00
	case abs >= 0x477ff000: // rounds to 65520 or more, or is Inf
		return sign | 0x7c00
	case abs >= 0x38800000: // a normal half: rebias the exponent; a mantissa that
		// rounds up carries into it, as it should
		return sign | uint16(round(abs-112<<23, 13))
	case abs < 0x33000000: // at most half the smallest subnormal: zero
		return sign
	}
	// A subnormal half: the mantissa with its leading bit, in units of 2^-24.
	e := abs >> 23
	return sign | uint16(round(abs&0x7fffff|0x800000, uint(126-e)))
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(man) / 1024 * float32(math.Pow(2, -14))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// pretranspose stores, for float constants read only as the right operand of MatMul
// (not transposed) or as a 1×1 Conv2D kernel, the transposed matrix the matmul kernel
// wants, and drops the original: weights are held once.
//
// They are held in IEEE half precision. A sentence's products have few rows, so they
// are bound by streaming the weights from memory, and halves halve that (and the heap
// the model holds). The products still accumulate in single precision; the vectors
// stay within cosine 0.999999 of the reference (TestVectorsMatchReference).
func (g *graph) pretranspose() {
	for ci, c := range g.nodes {
		if c.op != "Const" || c.value.dt != dtFloat {
			continue
		}
		ok := g.uses[ci] > 0
		for _, n := range g.nodes {
			for k, in := range n.inputs {
				if in.node != ci {
					continue
				}
				switch {
				case k == 1 && n.op == "MatMul" && !n.bool("transpose_b") && c.value.rank() == 2:
				case k == 1 && n.op == "Conv2D" && c.value.rank() == 4 && c.value.shape[0] == 1 && c.value.shape[1] == 1:
				default:
					ok = false
				}
			}
		}
		if !ok {
			continue
		}
		s := c.value.shape
		rows, cols := s[len(s)-2], s[len(s)-1]
		t := transpose2D(rows, cols, c.value.f)
		h := make([]uint16, len(t))
		for i, v := range t {
			h[i] = floatToHalf(v)
		}
		c.value = &tensor{dt: dtFloat, shape: s, h: h}
		g.weights -= 2 * len(h)
	}
}

// run executes the graph on the feeds and returns the output. Intermediate values
// are dropped as soon as the last node that reads them has run, and their buffers
// recycled (see runState).
func (g *graph) run(feeds map[string]*tensor) (*tensor, error) {
	vals := make([][]*tensor, len(g.nodes))
	uses := slices.Clone(g.uses)
	for name, idx := range g.inputs {
		t, ok := feeds[name]
		if !ok {
			return nil, fmt.Errorf("use: graph input %q not fed", name)
		}
		vals[idx] = []*tensor{t}
	}
	ex := newRunState()
	in := make([]*tensor, 0, 8)
	for i, n := range g.nodes {
		switch n.op {
		case "Const":
			vals[i] = []*tensor{n.value}
			continue
		case "Placeholder":
			continue
		}
		in = in[:0]
		for _, r := range n.inputs {
			outs := vals[r.node]
			if r.out >= len(outs) {
				return nil, fmt.Errorf("use: node %s reads output %d of %s, which has %d", n.name, r.out, g.nodes[r.node].name, len(outs))
			}
			in = append(in, outs[r.out])
		}
		out, err := n.fn(ex, n, in)
		if err != nil {
			return nil, fmt.Errorf("use: %s (%s): %w", n.name, n.op, err)
		}
		for _, t := range out {
			ex.hold(t)
		}
		vals[i] = out
		for _, r := range n.inputs {
			uses[r.node]--
			if uses[r.node] == 0 && g.nodes[r.node].op != "Const" {
				for _, t := range vals[r.node] {
					ex.drop(t)
				}
				vals[r.node] = nil
			}
		}
	}
	return vals[g.output][0], nil
}
