package use

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// opFunc runs one node on its inputs and returns its outputs.
type opFunc func(ex *runState, n *node, in []*tensor) ([]*tensor, error)

// ops are the TensorFlow ops this interpreter implements, with TensorFlow's semantics
// for the cases the Universal Sentence Encoder graph uses; anything else is an error,
// never a guess. Loading a graph with an op missing here fails and names the op.
var ops map[string]opFunc

func init() {
	ops = map[string]opFunc{
		"Add":           arith(binAdd),
		"AddV2":         arith(binAdd),
		"Sub":           arith(binSub),
		"Mul":           arith(binMul),
		"RealDiv":       arith(binDiv),
		"Maximum":       arith(binMax),
		"Less":          arith(binLess),
		"Greater":       arith(binGreater),
		"Square":        unary(unSquare),
		"Rsqrt":         unary(unRsqrt),
		"Sin":           unary(unSin),
		"Cos":           unary(unCos),
		"Tanh":          unary(unTanh),
		"Relu":          unary(unRelu),
		"Sum":           reduction(reduceSum),
		"Mean":          reduction(reduceMean),
		"Max":           reduction(reduceMax),
		"Prod":          reduction(reduceProd),
		"LogicalNot":    opLogicalNot,
		"Cast":          opCast,
		"Shape":         opShape,
		"Reshape":       opReshape,
		"ExpandDims":    opExpandDims,
		"Squeeze":       opSqueeze,
		"Pack":          opPack,
		"ConcatV2":      opConcat,
		"StridedSlice":  opStridedSlice,
		"Slice":         opSlice,
		"SplitV":        opSplitV,
		"Transpose":     opTranspose,
		"GatherV2":      opGatherV2,
		"GatherNd":      opGatherNd,
		"ScatterNd":     opScatterNd,
		"SparseToDense": opSparseToDense,
		"Where":         opWhere,
		"Range":         opRange,
		"BiasAdd":       opBiasAdd,
		"MatMul":        opMatMul,
		"BatchMatMul":   opBatchMatMul,
		"BatchMatMulV2": opBatchMatMul,
		"Conv2D":        opConv2D,
		"Softmax":       opSoftmax,
	}
}

func one(t *tensor) []*tensor { return []*tensor{t} }

func wantInputs(in []*tensor, n int) error {
	if len(in) != n {
		return fmt.Errorf("want %d inputs, got %d", n, len(in))
	}
	return nil
}

func wantFloat(t *tensor) error {
	if t.dt != dtFloat {
		return fmt.Errorf("want float32, got %s", t)
	}
	return nil
}

// broadcastShape is NumPy broadcasting of two shapes.
func broadcastShape(a, b []int) ([]int, error) {
	r := max(len(a), len(b))
	out := make([]int, r)
	for k := range r {
		da, db := 1, 1
		if j := k - (r - len(a)); j >= 0 {
			da = a[j]
		}
		if j := k - (r - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[k] = da
		case da == 1:
			out[k] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
		}
	}
	return out, nil
}

// bstrides returns strides of shape aligned to out's rank, zero on broadcast dims.
func bstrides(shape, out []int) []int {
	s := strides(shape)
	r := make([]int, len(out))
	off := len(out) - len(shape)
	for k := range shape {
		if shape[k] != 1 {
			r[k+off] = s[k]
		}
	}
	return r
}

// binOp is an elementwise binary op. Ops are selected by a switch around whole rows
// rather than passed as functions: a call per element cost more than the arithmetic.
type binOp uint8

const (
	binAdd binOp = iota
	binSub
	binMul
	binDiv
	binMax
	binLess
	binGreater
)

// compares reports whether op yields bools.
func (op binOp) compares() bool { return op == binLess || op == binGreater }

// arithRow sets dst[j] = x[j] op y[j] for an arithmetic op. dst may be x or y.
// Float rows go to the AVX kernels where there are any, save a tail of fewer than
// eight (and Maximum, whose NaN rules differ from VMAXPS's).
func arithRow[T int32 | float32](op binOp, dst, x, y []T) {
	x, y = x[:len(dst)], y[:len(dst)]
	if f, ok := any(dst).([]float32); ok && useSIMD && op != binMax {
		if k := len(f) &^ 7; k > 0 {
			simdRow(op, f, any(x).([]float32), any(y).([]float32), k)
			dst, x, y = dst[k:], x[k:], y[k:]
		}
	}
	switch op {
	case binAdd:
		for j := range dst {
			dst[j] = x[j] + y[j]
		}
	case binSub:
		for j := range dst {
			dst[j] = x[j] - y[j]
		}
	case binMul:
		for j := range dst {
			dst[j] = x[j] * y[j]
		}
	case binDiv:
		for j := range dst {
			dst[j] = x[j] / y[j]
		}
	case binMax:
		for j := range dst {
			dst[j] = max(x[j], y[j])
		}
	}
}

// simdRow sets dst[j] = x[j] op y[j] for j < n, a multiple of 8, with AVX.
func simdRow(op binOp, dst, x, y []float32, n int) {
	switch op {
	case binAdd:
		addAVX(&dst[0], &x[0], &y[0], n)
	case binSub:
		subAVX(&dst[0], &x[0], &y[0], n)
	case binMul:
		mulAVX(&dst[0], &x[0], &y[0], n)
	case binDiv:
		divAVX(&dst[0], &x[0], &y[0], n)
	}
}

// compareRow sets dst[j] = x[j] op y[j] for a comparison.
func compareRow[T int32 | float32](op binOp, dst []bool, x, y []T) {
	x, y = x[:len(dst)], y[:len(dst)]
	switch op {
	case binLess:
		for j := range dst {
			dst[j] = x[j] < y[j]
		}
	case binGreater:
		for j := range dst {
			dst[j] = x[j] > y[j]
		}
	}
}

// bcast applies row to a and b with NumPy broadcasting: row(dst, x, y) computes one
// run of the output (from alloc, which need not clear it) from runs of the operands at
// least as long. Operands that match the output take one call; otherwise the output
// goes a row (last axis) at a time, and an operand broadcast along that axis is
// spread over a scratch row first.
func bcast[T, R any](a []T, as []int, b []T, bs []int, alloc func(int) []R, row func(dst []R, x, y []T)) ([]R, []int, error) {
	out, err := broadcastShape(as, bs)
	if err != nil {
		return nil, nil, err
	}
	n := numElements(out)
	res := alloc(n)
	if n == 0 {
		return res, out, nil
	}
	if len(a) == n && len(b) == n {
		row(res, a, b)
		return res, out, nil
	}
	// An operand of one element goes against the other in runs of a scratch row.
	if len(a) == n && len(b) == 1 || len(a) == 1 && len(b) == n {
		const run = 1024
		ra, rb := newRower(a, len(a) == 1, min(n, run)), newRower(b, len(b) == 1, min(n, run))
		for o := 0; o < n; o += run {
			row(res[o:min(o+run, n)], ra.at(o*min(len(a)-1, 1)), rb.at(o*min(len(b)-1, 1)))
		}
		return res, out, nil
	}
	r := len(out)
	inner := out[r-1]
	sa, sb := bstrides(as, out), bstrides(bs, out)
	ra, rb := newRower(a, sa[r-1] == 0, inner), newRower(b, sb[r-1] == 0, inner)
	idx := make([]int, r-1)
	for o := 0; o < n; o += inner {
		pa, pb := 0, 0
		for k, v := range idx {
			pa += v * sa[k]
			pb += v * sb[k]
		}
		row(res[o:o+inner], ra.at(pa), rb.at(pb))
		nextIndex(idx, out)
	}
	return res, out, nil
}

// rower gives the rows of one operand of bcast: runs of x, or, for an operand
// broadcast along the row, a scratch row filled with one element of x (filled again
// only when the element changes position, so a scalar is spread once).
type rower[T any] struct {
	x      []T
	inner  int
	spread []T // nil unless broadcast along the row
	filled int // the position spread holds, -1 none
}

func newRower[T any](x []T, broadcast bool, inner int) *rower[T] {
	r := &rower[T]{x: x, inner: inner, filled: -1}
	if broadcast {
		r.spread = make([]T, inner)
	}
	return r
}

// at returns the row that starts at position p of x (shorter at the end of x).
func (r *rower[T]) at(p int) []T {
	if r.spread == nil {
		return r.x[p:min(p+r.inner, len(r.x))]
	}
	if r.filled != p {
		r.spread[0] = r.x[p]
		for k := 1; k < len(r.spread); k *= 2 {
			copy(r.spread[k:], r.spread[:k])
		}
		r.filled = p
	}
	return r.spread
}

// arith runs a binary op on float or int operands, with broadcasting.
func arith(op binOp) opFunc {
	return func(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
		if err := wantInputs(in, 2); err != nil {
			return nil, err
		}
		a, b := in[0], in[1]
		if a.dt != b.dt {
			return nil, fmt.Errorf("operands %s and %s differ in type", a, b)
		}
		var t *tensor
		var err error
		switch {
		case op.compares() && a.dt == dtFloat:
			t, err = boolResult(bcast(a.f, a.shape, b.f, b.shape, makeSlice[bool], func(d []bool, x, y []float32) { compareRow(op, d, x, y) }))
		case op.compares() && a.dt == dtInt:
			t, err = boolResult(bcast(a.i, a.shape, b.i, b.shape, makeSlice[bool], func(d []bool, x, y []int32) { compareRow(op, d, x, y) }))
		case a.dt == dtFloat:
			var r []float32
			var shape []int
			r, shape, err = bcast(a.f, a.shape, b.f, b.shape, ex.floats, func(d, x, y []float32) { arithRow(op, d, x, y) })
			t = floatTensor(shape, r)
		case a.dt == dtInt && op != binDiv:
			var r []int32
			var shape []int
			r, shape, err = bcast(a.i, a.shape, b.i, b.shape, makeSlice[int32], func(d, x, y []int32) { arithRow(op, d, x, y) })
			t = intTensor(shape, r)
		default:
			return nil, fmt.Errorf("unsupported operand type %s", a.dt)
		}
		if err != nil {
			return nil, err
		}
		return one(t), nil
	}
}

func makeSlice[T any](n int) []T { return make([]T, n) }

func boolResult(r []bool, shape []int, err error) (*tensor, error) {
	return &tensor{dt: dtBool, shape: shape, b: r}, err
}

// unOp is an elementwise unary op on floats.
type unOp uint8

const (
	unSquare unOp = iota
	unRsqrt
	unSin
	unCos
	unTanh
	unRelu
)

func unary(op unOp) opFunc {
	return func(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
		if err := wantInputs(in, 1); err != nil {
			return nil, err
		}
		if err := wantFloat(in[0]); err != nil {
			return nil, err
		}
		x := in[0].f
		out := ex.floats(len(x))
		switch op {
		case unSquare:
			arithRow(binMul, out, x, x)
		case unRsqrt:
			for k, v := range x {
				out[k] = float32(1 / math.Sqrt(float64(v)))
			}
		case unSin:
			for k, v := range x {
				out[k] = float32(math.Sin(float64(v)))
			}
		case unCos:
			for k, v := range x {
				out[k] = float32(math.Cos(float64(v)))
			}
		case unTanh:
			for k, v := range x {
				out[k] = float32(math.Tanh(float64(v)))
			}
		case unRelu:
			for k, v := range x {
				out[k] = max(v, 0)
			}
		}
		return one(floatTensor(slices.Clone(in[0].shape), out)), nil
	}
}

func opLogicalNot(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, err
	}
	if in[0].dt != dtBool {
		return nil, fmt.Errorf("want bool, got %s", in[0])
	}
	out := newTensor(dtBool, slices.Clone(in[0].shape))
	for k, v := range in[0].b {
		out.b[k] = !v
	}
	return one(out), nil
}

func opCast(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, err
	}
	dst, ok := n.attrDtype["DstT"]
	if !ok {
		return nil, errors.New("no supported DstT")
	}
	x := in[0]
	if x.dt == dst {
		return one(x), nil
	}
	out := ex.tensor(dst, slices.Clone(x.shape))
	for k := range x.size() {
		var v float64
		switch x.dt {
		case dtFloat:
			v = float64(x.f[k])
		case dtInt:
			v = float64(x.i[k])
		case dtBool:
			if x.b[k] {
				v = 1
			}
		}
		switch dst {
		case dtFloat:
			out.f[k] = float32(v)
		case dtInt:
			out.i[k] = int32(math.Trunc(v))
		case dtBool:
			out.b[k] = v != 0
		}
	}
	return one(out), nil
}

type reduceKind int

const (
	reduceSum reduceKind = iota
	reduceMean
	reduceMax
	reduceProd
)

// reduction reduces over the axes in in[1], one axis at a time: each pass is a sum
// (or max, or product) of contiguous rows, with no per-element index arithmetic.
// Values accumulate in float64.
func reduction(kind reduceKind) opFunc {
	return func(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
		if err := wantInputs(in, 2); err != nil {
			return nil, err
		}
		x := in[0]
		axesRaw, err := in[1].ints()
		if err != nil {
			return nil, err
		}
		r := x.rank()
		reduced := make([]bool, r)
		for _, a := range axesRaw {
			a, err := normAxis(a, r)
			if err != nil {
				return nil, err
			}
			reduced[a] = true
		}
		if x.dt != dtFloat && x.dt != dtInt {
			return nil, fmt.Errorf("cannot reduce %s", x)
		}
		keep := n.bool("keep_dims")
		outShape := []int{}
		shape := slices.Clone(x.shape)
		count := 1
		var vals []float64 // nil until the first pass, which reads x
		pass := func(outer, d, inner int) {
			switch {
			case vals != nil:
				vals = reduceAxis(kind, vals, outer, d, inner)
			case x.dt == dtFloat:
				vals = reduceAxis(kind, x.f, outer, d, inner)
			default:
				vals = reduceAxis(kind, x.i, outer, d, inner)
			}
		}
		for k, d := range x.shape {
			if !reduced[k] {
				outShape = append(outShape, d)
				continue
			}
			if keep {
				outShape = append(outShape, 1)
			}
			count *= d
			pass(numElements(shape[:k]), d, numElements(shape[k+1:]))
			shape[k] = 1
		}
		if vals == nil { // no axis: each element is its own reduction
			pass(x.size(), 1, 1)
		}
		out := ex.tensor(x.dt, outShape)
		for k, v := range vals {
			if kind == reduceMean {
				if x.dt == dtInt {
					v = math.Trunc(v / float64(count))
				} else {
					v /= float64(count)
				}
			}
			if x.dt == dtFloat {
				out.f[k] = float32(v)
			} else {
				out.i[k] = int32(v)
			}
		}
		return one(out), nil
	}
}

// reduceAxis reduces the middle axis of vals seen as outer×d×inner, in float64.
func reduceAxis[T float32 | int32 | float64](kind reduceKind, vals []T, outer, d, inner int) []float64 {
	acc := make([]float64, outer*inner)
	switch kind {
	case reduceMax:
		for k := range acc {
			acc[k] = math.Inf(-1)
		}
	case reduceProd:
		for k := range acc {
			acc[k] = 1
		}
	}
	if inner == 1 { // the last axis: each output folds one contiguous run
		for o := range acc {
			acc[o] = fold(kind, acc[o], vals[o*d:o*d+d])
		}
		return acc
	}
	for o := range outer {
		dst := acc[o*inner : o*inner+inner]
		for p := range d {
			src := vals[(o*d+p)*inner:][:len(dst)]
			switch kind {
			case reduceSum, reduceMean:
				for j, v := range src {
					dst[j] += float64(v)
				}
			case reduceMax:
				for j, v := range src {
					dst[j] = max(dst[j], float64(v))
				}
			case reduceProd:
				for j, v := range src {
					dst[j] *= float64(v)
				}
			}
		}
	}
	return acc
}

// fold combines the values xs into acc.
func fold[T float32 | int32 | float64](kind reduceKind, acc float64, xs []T) float64 {
	switch kind {
	case reduceSum, reduceMean:
		for _, v := range xs {
			acc += float64(v)
		}
	case reduceMax:
		for _, v := range xs {
			acc = max(acc, float64(v))
		}
	case reduceProd:
		for _, v := range xs {
			acc *= float64(v)
		}
	}
	return acc
}

func opShape(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, err
	}
	s := make([]int32, in[0].rank())
	for k, d := range in[0].shape {
		s[k] = int32(d)
	}
	return one(intTensor([]int{len(s)}, s)), nil
}

func opReshape(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	shape, err := in[1].ints()
	if err != nil {
		return nil, err
	}
	size, infer := 1, -1
	for k, d := range shape {
		if d == -1 {
			if infer >= 0 {
				return nil, errors.New("more than one -1 in shape")
			}
			infer = k
			continue
		}
		size *= d
	}
	total := in[0].size()
	if infer >= 0 {
		if size == 0 || total%size != 0 {
			return nil, fmt.Errorf("cannot reshape %v to %v", in[0].shape, shape)
		}
		shape[infer] = total / size
	} else if size != total {
		return nil, fmt.Errorf("cannot reshape %v to %v", in[0].shape, shape)
	}
	return one(in[0].withShape(shape)), nil
}

func opExpandDims(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	axis, err := in[1].scalarInt()
	if err != nil {
		return nil, err
	}
	r := in[0].rank()
	if axis < 0 {
		axis += r + 1
	}
	if axis < 0 || axis > r {
		return nil, fmt.Errorf("axis %d out of range", axis)
	}
	shape := slices.Insert(slices.Clone(in[0].shape), axis, 1)
	return one(in[0].withShape(shape)), nil
}

func opSqueeze(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, err
	}
	x := in[0]
	drop := make([]bool, x.rank())
	dims := n.attrList["squeeze_dims"]
	if len(dims) == 0 {
		for k, d := range x.shape {
			drop[k] = d == 1
		}
	}
	for _, a := range dims {
		a, err := normAxis(a, x.rank())
		if err != nil {
			return nil, err
		}
		if x.shape[a] != 1 {
			return nil, fmt.Errorf("cannot squeeze dimension %d of %v", a, x.shape)
		}
		drop[a] = true
	}
	shape := []int{}
	for k, d := range x.shape {
		if !drop[k] {
			shape = append(shape, d)
		}
	}
	return one(x.withShape(shape)), nil
}

func opPack(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if len(in) == 0 {
		return nil, errors.New("no inputs")
	}
	first := in[0]
	r := first.rank()
	axis := n.int("axis")
	if axis < 0 {
		axis += r + 1
	}
	if axis < 0 || axis > r {
		return nil, fmt.Errorf("axis %d out of range", axis)
	}
	for _, t := range in {
		if t.dt != first.dt || !slices.Equal(t.shape, first.shape) {
			return nil, fmt.Errorf("cannot pack %s with %s", t, first)
		}
	}
	shape := slices.Insert(slices.Clone(first.shape), axis, len(in))
	out := ex.tensor(first.dt, shape)
	outer := numElements(first.shape[:axis])
	inner := numElements(first.shape[axis:])
	for o := range outer {
		for k, t := range in {
			copyRange(out, (o*len(in)+k)*inner, t, o*inner, inner)
		}
	}
	return one(out), nil
}

func opConcat(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if len(in) < 2 {
		return nil, errors.New("want at least one value and an axis")
	}
	axis, err := in[len(in)-1].scalarInt()
	if err != nil {
		return nil, err
	}
	vals := in[:len(in)-1]
	first := vals[0]
	r := first.rank()
	if axis, err = normAxis(axis, r); err != nil {
		return nil, err
	}
	shape := slices.Clone(first.shape)
	shape[axis] = 0
	for _, t := range vals {
		if t.dt != first.dt || t.rank() != r {
			return nil, fmt.Errorf("cannot concatenate %s with %s", t, first)
		}
		for k := range r {
			if k != axis && t.shape[k] != first.shape[k] {
				return nil, fmt.Errorf("cannot concatenate %s with %s", t, first)
			}
		}
		shape[axis] += t.shape[axis]
	}
	out := ex.tensor(first.dt, shape)
	outer := numElements(shape[:axis])
	dst := 0
	for o := range outer {
		for _, t := range vals {
			chunk := numElements(t.shape[axis:])
			copyRange(out, dst, t, o*chunk, chunk)
			dst += chunk
		}
	}
	return one(out), nil
}

// gatherStrided copies the elements of x at begin + i*step for every index i of
// shape into a new tensor of that shape.
func gatherStrided(ex *runState, x *tensor, shape, begin, step []int) *tensor {
	xs := strides(x.shape)
	base := 0
	str := make([]int, len(shape))
	for k := range shape {
		base += begin[k] * xs[k]
		str[k] = step[k] * xs[k]
	}
	return gatherRows(ex, x, shape, base, str)
}

// gatherRows returns the tensor of shape whose element i is x[base + Σ i[k]*str[k]]:
// slices, splits and transposes. It goes a row (last axis) at a time, copying rows
// that are contiguous in x.
func gatherRows(ex *runState, x *tensor, shape []int, base int, str []int) *tensor {
	out := ex.tensor(x.dt, shape)
	n := out.size()
	if n == 0 {
		return out
	}
	r := len(shape)
	if r == 0 {
		copyElem(out, 0, x, base)
		return out
	}
	inner, is := shape[r-1], str[r-1]
	idx := make([]int, r-1)
	for o := 0; o < n; o += inner {
		src := base
		for k, v := range idx {
			src += v * str[k]
		}
		switch {
		case is == 1:
			copyRange(out, o, x, src, inner)
		case x.dt == dtFloat:
			dst := out.f[o : o+inner]
			for j := range dst {
				dst[j] = x.f[src+j*is]
			}
		default:
			for j := range inner {
				copyElem(out, o+j, x, src+j*is)
			}
		}
		nextIndex(idx, shape)
	}
	return out
}

// nextIndex advances idx, a row-major index into shape (or its leading dimensions).
func nextIndex(idx, shape []int) {
	for k := len(idx) - 1; k >= 0; k-- {
		idx[k]++
		if idx[k] < shape[k] {
			return
		}
		idx[k] = 0
	}
}

func opStridedSlice(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 4); err != nil {
		return nil, err
	}
	x := in[0]
	begin, err := in[1].ints()
	if err != nil {
		return nil, err
	}
	end, err := in[2].ints()
	if err != nil {
		return nil, err
	}
	step, err := in[3].ints()
	if err != nil {
		return nil, err
	}
	if len(begin) != len(end) || len(begin) != len(step) || len(begin) > x.rank() {
		return nil, fmt.Errorf("slice spec %v:%v:%v does not fit %v", begin, end, step, x.shape)
	}
	if n.int("ellipsis_mask") != 0 || n.int("new_axis_mask") != 0 {
		return nil, errors.New("ellipsis_mask and new_axis_mask are not supported")
	}
	bm, em, sm := n.int("begin_mask"), n.int("end_mask"), n.int("shrink_axis_mask")
	r := x.rank()
	b, s, shape := make([]int, r), make([]int, r), make([]int, r)
	var outShape []int
	for k := range r {
		d := x.shape[k]
		if k >= len(begin) {
			b[k], s[k], shape[k] = 0, 1, d
			outShape = append(outShape, d)
			continue
		}
		st := step[k]
		if st == 0 {
			return nil, errors.New("zero stride")
		}
		if sm&(1<<k) != 0 {
			i := begin[k]
			if i < 0 {
				i += d
			}
			if i < 0 || i >= d {
				return nil, fmt.Errorf("index %d out of range for dimension %d of size %d", begin[k], k, d)
			}
			b[k], s[k], shape[k] = i, 1, 1
			continue
		}
		clamp := func(v int) int {
			if v < 0 {
				v += d
			}
			if st > 0 {
				return min(max(v, 0), d)
			}
			return min(max(v, -1), d-1)
		}
		var lo, hi int
		if bm&(1<<k) != 0 {
			lo = map[bool]int{true: 0, false: d - 1}[st > 0]
		} else {
			lo = clamp(begin[k])
		}
		if em&(1<<k) != 0 {
			hi = map[bool]int{true: d, false: -1}[st > 0]
		} else {
			hi = clamp(end[k])
		}
		cnt := 0
		if st > 0 && hi > lo {
			cnt = (hi - lo + st - 1) / st
		} else if st < 0 && lo > hi {
			cnt = (lo - hi - st - 1) / -st
		}
		b[k], s[k], shape[k] = lo, st, cnt
		outShape = append(outShape, cnt)
	}
	out := gatherStrided(ex, x, shape, b, s)
	if outShape == nil {
		outShape = []int{}
	}
	return one(out.withShape(outShape)), nil
}

func opSlice(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, err
	}
	x := in[0]
	begin, err := in[1].ints()
	if err != nil {
		return nil, err
	}
	size, err := in[2].ints()
	if err != nil {
		return nil, err
	}
	if len(begin) != x.rank() || len(size) != x.rank() {
		return nil, fmt.Errorf("slice %v+%v does not fit %v", begin, size, x.shape)
	}
	step := make([]int, x.rank())
	for k := range size {
		step[k] = 1
		if size[k] == -1 {
			size[k] = x.shape[k] - begin[k]
		}
		if begin[k] < 0 || size[k] < 0 || begin[k]+size[k] > x.shape[k] {
			return nil, fmt.Errorf("slice %v+%v does not fit %v", begin, size, x.shape)
		}
	}
	return one(gatherStrided(ex, x, size, begin, step)), nil
}

func opSplitV(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, err
	}
	x := in[0]
	sizes, err := in[1].ints()
	if err != nil {
		return nil, err
	}
	axis, err := in[2].scalarInt()
	if err != nil {
		return nil, err
	}
	if axis, err = normAxis(axis, x.rank()); err != nil {
		return nil, err
	}
	total, infer := 0, -1
	for k, s := range sizes {
		if s == -1 {
			infer = k
			continue
		}
		total += s
	}
	if infer >= 0 {
		sizes[infer] = x.shape[axis] - total
		total = x.shape[axis]
	}
	if total != x.shape[axis] {
		return nil, fmt.Errorf("split sizes %v do not add up to %d", sizes, x.shape[axis])
	}
	outs := make([]*tensor, len(sizes))
	begin := make([]int, x.rank())
	step := make([]int, x.rank())
	for k := range step {
		step[k] = 1
	}
	for k, s := range sizes {
		shape := slices.Clone(x.shape)
		shape[axis] = s
		outs[k] = gatherStrided(ex, x, shape, begin, step)
		begin[axis] += s
	}
	return outs, nil
}

func opTranspose(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	perm, err := in[1].ints()
	if err != nil {
		return nil, err
	}
	return one2(transpose(ex, in[0], perm))
}

func one2(t *tensor, err error) ([]*tensor, error) {
	if err != nil {
		return nil, err
	}
	return one(t), nil
}

func transpose(ex *runState, x *tensor, perm []int) (*tensor, error) {
	r := x.rank()
	if len(perm) != r {
		return nil, fmt.Errorf("permutation %v for rank %d", perm, r)
	}
	xs := strides(x.shape)
	shape := make([]int, r)
	ps := make([]int, r)
	seen := make([]bool, r)
	for k, p := range perm {
		if p < 0 || p >= r || seen[p] {
			return nil, fmt.Errorf("bad permutation %v", perm)
		}
		seen[p] = true
		shape[k] = x.shape[p]
		ps[k] = xs[p]
	}
	return gatherRows(ex, x, shape, 0, ps), nil
}

func opGatherV2(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, err
	}
	if n.int("batch_dims") != 0 {
		return nil, errors.New("batch_dims is not supported")
	}
	params, indices := in[0], in[1]
	axis, err := in[2].scalarInt()
	if err != nil {
		return nil, err
	}
	if axis, err = normAxis(axis, params.rank()); err != nil {
		return nil, err
	}
	idx, err := indices.ints()
	if err != nil {
		return nil, err
	}
	shape := slices.Concat(params.shape[:axis], indices.shape, params.shape[axis+1:])
	out := ex.tensor(params.dt, shape)
	outer := numElements(params.shape[:axis])
	inner := numElements(params.shape[axis+1:])
	d := params.shape[axis]
	dst := 0
	for o := range outer {
		for _, i := range idx {
			if i < 0 || i >= d {
				return nil, fmt.Errorf("index %d out of range [0, %d)", i, d)
			}
			copyRange(out, dst, params, (o*d+i)*inner, inner)
			dst += inner
		}
	}
	return one(out), nil
}

// ndOffsets turns indices [..., depth] into element offsets into shape, with the
// size of the slice each one addresses.
func ndOffsets(indices *tensor, shape []int) (offs []int, slice int, lead []int, err error) {
	if indices.rank() < 1 {
		return nil, 0, nil, errors.New("indices must have rank ≥ 1")
	}
	depth := indices.shape[indices.rank()-1]
	if depth > len(shape) {
		return nil, 0, nil, fmt.Errorf("index depth %d exceeds rank %d", depth, len(shape))
	}
	idx, err := indices.ints()
	if err != nil {
		return nil, 0, nil, err
	}
	slice = numElements(shape[depth:])
	ss := strides(shape)
	lead = indices.shape[:indices.rank()-1]
	cnt := numElements(lead)
	offs = make([]int, cnt)
	for e := range cnt {
		o := 0
		for k := range depth {
			v := idx[e*depth+k]
			if v < 0 || v >= shape[k] {
				return nil, 0, nil, fmt.Errorf("index %v out of range for %v", idx[e*depth:e*depth+depth], shape)
			}
			o += v * ss[k]
		}
		offs[e] = o
	}
	return offs, slice, lead, nil
}

func opGatherNd(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	params := in[0]
	offs, slice, lead, err := ndOffsets(in[1], params.shape)
	if err != nil {
		return nil, err
	}
	depth := in[1].shape[in[1].rank()-1]
	out := ex.tensor(params.dt, slices.Concat(lead, params.shape[depth:]))
	for e, o := range offs {
		copyRange(out, e*slice, params, o, slice)
	}
	return one(out), nil
}

func opScatterNd(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, err
	}
	indices, updates := in[0], in[1]
	shape, err := in[2].ints()
	if err != nil {
		return nil, err
	}
	offs, slice, _, err := ndOffsets(indices, shape)
	if err != nil {
		return nil, err
	}
	if updates.size() != len(offs)*slice {
		return nil, fmt.Errorf("updates %v do not match %d slices of %d", updates.shape, len(offs), slice)
	}
	out := ex.tensor(updates.dt, shape)
	clear(out.f) // updates add up
	for e, o := range offs {
		switch updates.dt {
		case dtFloat:
			dst := out.f[o : o+slice]
			arithRow(binAdd, dst, dst, updates.f[e*slice:e*slice+slice])
		case dtInt:
			for j := range slice {
				out.i[o+j] += updates.i[e*slice+j]
			}
		default:
			return nil, fmt.Errorf("cannot scatter %s", updates)
		}
	}
	return one(out), nil
}

func opSparseToDense(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 4); err != nil {
		return nil, err
	}
	indices, values, def := in[0], in[2], in[3]
	shape, err := in[1].ints()
	if err != nil {
		return nil, err
	}
	if values.dt != def.dt || def.size() != 1 {
		return nil, fmt.Errorf("values %s and default %s", values, def)
	}
	if indices.rank() < 2 {
		indices = indices.withShape([]int{indices.size(), 1})
	}
	offs, slice, _, err := ndOffsets(indices, shape)
	if err != nil {
		return nil, err
	}
	if slice != 1 {
		return nil, errors.New("indices must address elements")
	}
	if values.size() != 1 && values.size() != len(offs) {
		return nil, fmt.Errorf("%d values for %d indices", values.size(), len(offs))
	}
	out := ex.tensor(values.dt, shape)
	for e := range out.size() {
		copyElem(out, e, def, 0)
	}
	for e, o := range offs {
		src := e
		if values.size() == 1 {
			src = 0
		}
		copyElem(out, o, values, src)
	}
	return one(out), nil
}

func opWhere(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, err
	}
	x := in[0]
	r := x.rank()
	var coords []int32
	idx := make([]int, r)
	cnt := 0
	for e := range x.size() {
		var ok bool
		switch x.dt {
		case dtBool:
			ok = x.b[e]
		case dtInt:
			ok = x.i[e] != 0
		case dtFloat:
			ok = x.f[e] != 0
		}
		if ok {
			for _, v := range idx {
				coords = append(coords, int32(v))
			}
			cnt++
		}
		nextIndex(idx, x.shape)
	}
	if coords == nil {
		coords = []int32{}
	}
	return one(intTensor([]int{cnt, r}, coords)), nil
}

func opRange(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, err
	}
	if in[0].dt == dtInt {
		start, err := in[0].scalarInt()
		if err != nil {
			return nil, err
		}
		limit, err := in[1].scalarInt()
		if err != nil {
			return nil, err
		}
		delta, err := in[2].scalarInt()
		if err != nil {
			return nil, err
		}
		if delta == 0 {
			return nil, errors.New("zero delta")
		}
		cnt := max(0, int(math.Ceil(float64(limit-start)/float64(delta))))
		out := make([]int32, cnt)
		for k := range out {
			out[k] = int32(start + k*delta)
		}
		return one(intTensor([]int{cnt}, out)), nil
	}
	if in[0].dt != dtFloat || in[0].size() != 1 || in[1].size() != 1 || in[2].size() != 1 {
		return nil, errors.New("want scalar start, limit and delta")
	}
	start, limit, delta := float64(in[0].f[0]), float64(in[1].f[0]), float64(in[2].f[0])
	if delta == 0 {
		return nil, errors.New("zero delta")
	}
	cnt := max(0, int(math.Ceil((limit-start)/delta)))
	out := make([]float32, cnt)
	for k := range out {
		out[k] = float32(start + float64(k)*delta)
	}
	return one(floatTensor([]int{cnt}, out)), nil
}

func opBiasAdd(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	if f := n.attrS["data_format"]; f != "" && f != "NHWC" {
		return nil, fmt.Errorf("data format %s is not supported", f)
	}
	x, bias := in[0], in[1]
	if err := wantFloat(x); err != nil {
		return nil, err
	}
	c := bias.size()
	if x.rank() < 1 || x.shape[x.rank()-1] != c || bias.dt != dtFloat {
		return nil, fmt.Errorf("bias %s does not fit %s", bias, x)
	}
	out := ex.floats(len(x.f))
	for o := 0; o < len(out); o += c {
		arithRow(binAdd, out[o:o+c], x.f[o:o+c], bias.f)
	}
	return one(floatTensor(slices.Clone(x.shape), out)), nil
}

// asNK returns the right operand of a product as the kernel wants it, n×k: data is a
// rows×cols matrix, already n×k when isNK, else k×n and transposed here.
func asNK(data []float32, rows, cols int, isNK bool) []float32 {
	if isNK {
		return data
	}
	return transpose2D(rows, cols, data)
}

func opMatMul(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	a, b := in[0], in[1]
	if a.dt != dtFloat || b.dt != dtFloat || a.rank() != 2 || b.rank() != 2 {
		return nil, fmt.Errorf("want float matrices, got %s and %s", a, b)
	}
	m, k := a.shape[0], a.shape[1]
	ad := a.f
	if n.bool("transpose_a") {
		m, k = k, m
		ad = transpose2D(a.shape[0], a.shape[1], a.f)
	}
	k2, nn := b.shape[0], b.shape[1]
	if n.bool("transpose_b") {
		k2, nn = nn, k2
	}
	if k2 != k {
		return nil, fmt.Errorf("cannot multiply %v by %v (transpose_a %v, transpose_b %v)", a.shape, b.shape, n.bool("transpose_a"), n.bool("transpose_b"))
	}
	c := ex.floats(m * nn)
	switch {
	case b.h != nil: // pretransposed weight
		matmulNT(m, nn, k, ad, b.h, c)
	default:
		matmulNT(m, nn, k, ad, asNK(b.f, b.shape[0], b.shape[1], n.bool("transpose_b")), c)
	}
	return one(floatTensor([]int{m, nn}, c)), nil
}

func opConv2D(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	if x.dt != dtFloat || w.dt != dtFloat || x.rank() != 4 || w.rank() != 4 {
		return nil, fmt.Errorf("want float NHWC input and HWIO kernel, got %s and %s", x, w)
	}
	if f := n.attrS["data_format"]; f != "" && f != "NHWC" {
		return nil, fmt.Errorf("data format %s is not supported", f)
	}
	for _, attr := range []string{"strides", "dilations"} {
		for _, v := range n.attrList[attr] {
			if v != 1 {
				return nil, fmt.Errorf("%s %v: only 1 is supported", attr, n.attrList[attr])
			}
		}
	}
	if w.shape[0] != 1 || w.shape[1] != 1 {
		return nil, fmt.Errorf("only 1×1 kernels are supported, got %v", w.shape)
	}
	if p := n.attrS["padding"]; p != "VALID" && p != "SAME" {
		return nil, fmt.Errorf("padding %q is not supported", p)
	}
	cin, cout := w.shape[2], w.shape[3]
	if x.shape[3] != cin {
		return nil, fmt.Errorf("input %v does not fit kernel %v", x.shape, w.shape)
	}
	m := x.shape[0] * x.shape[1] * x.shape[2]
	c := ex.floats(m * cout)
	if w.h != nil { // pretransposed weight
		matmulNT(m, cout, cin, x.f, w.h, c)
	} else {
		matmulNT(m, cout, cin, x.f, transpose2D(cin, cout, w.f), c)
	}
	return one(floatTensor([]int{x.shape[0], x.shape[1], x.shape[2], cout}, c)), nil
}

func opBatchMatMul(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, err
	}
	a, b := in[0], in[1]
	if a.dt != dtFloat || b.dt != dtFloat || a.rank() < 2 || a.rank() != b.rank() {
		return nil, fmt.Errorf("want float tensors of one rank ≥ 2, got %s and %s", a, b)
	}
	r := a.rank()
	if !slices.Equal(a.shape[:r-2], b.shape[:r-2]) {
		return nil, fmt.Errorf("batch dimensions of %v and %v differ (broadcasting is not supported)", a.shape, b.shape)
	}
	adjX, adjY := n.bool("adj_x"), n.bool("adj_y")
	ar, ac := a.shape[r-2], a.shape[r-1]
	br, bc := b.shape[r-2], b.shape[r-1]
	m, k := ar, ac
	if adjX {
		m, k = ac, ar
	}
	nn, kb := bc, br
	if adjY {
		nn, kb = br, bc
	}
	if k != kb {
		return nil, fmt.Errorf("cannot multiply %v by %v (adj_x %v, adj_y %v)", a.shape, b.shape, adjX, adjY)
	}
	batch := numElements(a.shape[:r-2])
	c := ex.floats(batch * m * nn)
	// Operands go to the kernel as rows of k, padded (attention multiplies by k = the
	// token count); the packed copies are the run's scratch, taken here because the
	// products below may run in parallel.
	kp := padded(k)
	ap, bp := a.f, b.f
	if adjX || kp != k {
		ap = ex.floats(batch * m * kp)
		defer ex.release(ap)
	}
	if !adjY || kp != k {
		bp = ex.floats(batch * nn * kp)
		defer ex.release(bp)
	}
	mul := func(i int) {
		ad, bd := ap[i*m*kp:(i+1)*m*kp], bp[i*nn*kp:(i+1)*nn*kp]
		if adjX || kp != k {
			packK(ad, a.f[i*ar*ac:(i+1)*ar*ac], m, k, kp, adjX)
		}
		if !adjY || kp != k {
			packK(bd, b.f[i*br*bc:(i+1)*br*bc], nn, k, kp, !adjY)
		}
		matmulNT(m, nn, kp, ad, bd, c[i*m*nn:(i+1)*m*nn])
	}
	parallelFor(batch, batch*m*nn*k, mul)
	return []*tensor{floatTensor(slices.Concat(a.shape[:r-2], []int{m, nn}), c)}, nil
}

// parallelFor runs f(0..n-1), across GOMAXPROCS goroutines when work (a count of
// multiply-adds) is worth it.
func parallelFor(n, work int, f func(int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 || work < 1<<18 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := range workers {
		i0, i1 := w*per, min((w+1)*per, n)
		if i0 >= i1 {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := i0; i < i1; i++ {
				f(i)
			}
		}()
	}
	wg.Wait()
}

func opSoftmax(ex *runState, n *node, in []*tensor) ([]*tensor, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, err
	}
	x := in[0]
	if err := wantFloat(x); err != nil {
		return nil, err
	}
	if x.rank() < 1 {
		return nil, errors.New("softmax of a scalar")
	}
	c := x.shape[x.rank()-1]
	out := ex.floats(len(x.f))
	if c == 0 {
		return one(floatTensor(slices.Clone(x.shape), out)), nil
	}
	for o := 0; o < len(out); o += c {
		src, dst := x.f[o:o+c], out[o:o+c]
		mx := src[0]
		for _, v := range src {
			mx = max(mx, v)
		}
		var sum float64
		for j, v := range src {
			e := math.Exp(float64(v - mx))
			dst[j] = float32(e)
			sum += e
		}
		inv := 1 / sum
		for j := range dst {
			dst[j] = float32(float64(dst[j]) * inv)
		}
	}
	return one(floatTensor(slices.Clone(x.shape), out)), nil
}
