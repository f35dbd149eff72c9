package use

import (
	"math/bits"
	"sync"
)

// runState is one run of the graph. Float buffers of the values come from pools shared
// by all runs and go back as soon as no live value reads them: a single sentence made
// some 3 MB of garbage, and the allocation, clearing and collection it brought cost
// more than most ops.
//
// An op's outputs are either buffers it took from the run or whole buffers of its
// inputs (Reshape, ExpandDims and Squeeze share their input's). The run counts, for
// each buffer it handed out, the live node values that hold it; constants and feeds
// are not counted, so they are never recycled.
type runState struct {
	held map[*float32]*pooled
}

// pooled is a buffer handed out by a run: the box it is pooled in and how many live
// values hold it.
type pooled struct {
	box   *[]float32
	class int
	refs  int
}

// minPooled is the smallest buffer worth pooling; smaller ones (scalars, masks, one
// row) are plainly allocated.
const minPooled = 256

// floatPools holds free buffers by capacity class: class c holds capacity 1<<c.
var floatPools [48]sync.Pool

func newRunState() *runState { return &runState{held: map[*float32]*pooled{}} }

// floats returns a buffer of n floats whose contents are undefined: for outputs the
// op overwrites entirely.
func (ex *runState) floats(n int) []float32 {
	if n < minPooled {
		return make([]float32, n)
	}
	c := bits.Len(uint(n - 1))
	box, _ := floatPools[c].Get().(*[]float32)
	if box == nil {
		b := make([]float32, 1<<c)
		box = &b
	}
	buf := (*box)[:n]
	ex.held[&buf[0]] = &pooled{box: box, class: c}
	return buf
}

// tensor returns a new tensor of shape, its float contents undefined (other types are
// zero).
func (ex *runState) tensor(dt dtype, shape []int) *tensor {
	if dt != dtFloat {
		return newTensor(dt, shape)
	}
	return floatTensor(shape, ex.floats(numElements(shape)))
}

// release returns buf, scratch an op took from floats and holds no value, to the
// pool.
func (ex *runState) release(buf []float32) {
	if len(buf) == 0 {
		return
	}
	if p := ex.held[&buf[0]]; p != nil && p.refs == 0 {
		ex.recycle(&buf[0], p)
	}
}

// recycle forgets the buffer at key and puts it back in its pool.
func (ex *runState) recycle(key *float32, p *pooled) {
	delete(ex.held, key)
	floatPools[p.class].Put(p.box)
}

// record is what the run knows of t's buffer, nil when the run did not hand it out.
func (ex *runState) record(t *tensor) *pooled {
	if t.dt != dtFloat || len(t.f) == 0 {
		return nil
	}
	return ex.held[&t.f[0]]
}

// hold counts t as a live value.
func (ex *runState) hold(t *tensor) {
	if p := ex.record(t); p != nil {
		p.refs++
	}
}

// drop ends t as a live value; its buffer goes back to the pool when no other live
// value holds it.
func (ex *runState) drop(t *tensor) {
	p := ex.record(t)
	if p == nil {
		return
	}
	if p.refs--; p.refs <= 0 {
		ex.recycle(&t.f[0], p)
	}
}
