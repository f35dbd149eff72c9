package use

import (
	"fmt"
	"strings"
)

// dtype is the element type of a tensor. TensorFlow's int64 is held as int32, as
// TensorFlow.js does: every integer in this graph (token ids, positions, shapes) is
// small.
type dtype uint8

const (
	dtFloat dtype = iota + 1
	dtInt
	dtBool
)

func (d dtype) String() string {
	switch d {
	case dtFloat:
		return "float32"
	case dtInt:
		return "int32"
	case dtBool:
		return "bool"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// tensor is a dense row-major array. Exactly one of f, i, b holds the data, by dt.
// Tensors are immutable once an op has returned them: ops that only change the shape
// (Reshape, ExpandDims, Squeeze) share the data.
type tensor struct {
	dt    dtype
	shape []int
	f     []float32
	i     []int32
	b     []bool
	// h, for a float weight read only as a matmul's right operand, holds the
	// transpose of its last two dimensions in half precision instead of f (see
	// graph.pretranspose).
	h []uint16
}

func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func (t *tensor) size() int { return numElements(t.shape) }
func (t *tensor) rank() int { return len(t.shape) }

func newTensor(dt dtype, shape []int) *tensor {
	t := &tensor{dt: dt, shape: shape}
	n := numElements(shape)
	switch dt {
	case dtFloat:
		t.f = make([]float32, n)
	case dtInt:
		t.i = make([]int32, n)
	case dtBool:
		t.b = make([]bool, n)
	}
	return t
}

func floatTensor(shape []int, data []float32) *tensor {
	return &tensor{dt: dtFloat, shape: shape, f: data}
}

func intTensor(shape []int, data []int32) *tensor {
	return &tensor{dt: dtInt, shape: shape, i: data}
}

// withShape returns a tensor sharing t's data under another shape of the same size.
func (t *tensor) withShape(shape []int) *tensor {
	return &tensor{dt: t.dt, shape: shape, f: t.f, i: t.i, b: t.b}
}

// ints reads an integer tensor (a shape, axes, indices) as ints.
func (t *tensor) ints() ([]int, error) {
	if t.dt != dtInt {
		return nil, fmt.Errorf("want an integer tensor, got %s", t.dt)
	}
	out := make([]int, len(t.i))
	for k, v := range t.i {
		out[k] = int(v)
	}
	return out, nil
}

// scalarInt reads a one-element integer tensor.
func (t *tensor) scalarInt() (int, error) {
	if t.dt != dtInt || len(t.i) != 1 {
		return 0, fmt.Errorf("want an integer scalar, got %s%v", t.dt, t.shape)
	}
	return int(t.i[0]), nil
}

func (t *tensor) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%v", t.dt, t.shape)
	return b.String()
}

// strides returns the row-major strides of shape.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for k := len(shape) - 1; k >= 0; k-- {
		s[k] = acc
		acc *= shape[k]
	}
	return s
}

// normAxis resolves a possibly negative axis against rank.
func normAxis(axis, rank int) (int, error) {
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, rank)
	}
	return axis, nil
}

// gatherElems copies element src of t into element dst of out (same dtype).
func copyElem(out *tensor, dst int, t *tensor, src int) {
	switch t.dt {
	case dtFloat:
		out.f[dst] = t.f[src]
	case dtInt:
		out.i[dst] = t.i[src]
	case dtBool:
		out.b[dst] = t.b[src]
	}
}

// copyRange copies n elements of t from src into out at dst (same dtype).
func copyRange(out *tensor, dst int, t *tensor, src, n int) {
	switch t.dt {
	case dtFloat:
		copy(out.f[dst:dst+n], t.f[src:src+n])
	case dtInt:
		copy(out.i[dst:dst+n], t.i[src:src+n])
	case dtBool:
		copy(out.b[dst:dst+n], t.b[src:src+n])
	}
}
