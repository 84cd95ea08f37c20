// Package redisbatch coalesces the concurrent Redis commands of one process
// into pipelines: many callers, one round trip.
//
// Enable installs a go-redis hook on a client, so every user of the client
// (the quota, the tile cache, the in-flight leases, anything else) batches
// without knowing it. A caller that finds the connection idle is sent at
// once, on its own goroutine, exactly as without the hook: it waits for
// nothing. Callers that arrive while a round trip is out queue, and go
// together, up to MaxBatch at a time, as soon as one returns. That is the
// policy rather than a timer of about 100 µs: a timer makes every queued
// caller wait out the timer even when Redis is idle, while this sends the
// moment a connection is free, and the batch grows by itself with the load
// (it holds what arrived during one round trip). The benchmark (see the
// README) measured it.
//
// Each command keeps its own result and error: a batch is a pipeline, not
// a transaction, and a command that fails fails alone. On a
// *redis.ClusterClient the pipeline is split by node by go-redis, so a
// batch is one round trip to each node it touches.
//
// A caller never waits past its context: a queued command whose caller has
// gone is not sent, and one already sent is answered to nobody. The batch
// itself runs until the latest deadline of its callers.
//
// Why not go-redis's own AutoPipeline (experimental in v9.23)? It is a
// separate client face that each caller must be written against, it
// batches on its own schedule, and its full-duplex mode runs hooks after
// the write; this hook keeps every existing call site, sends a lone caller
// on the spot, and leaves at each caller's deadline.
//
// A pipeline a caller builds travels whole, as one member of a batch: its
// commands stay together in the same round trip. That is how a caller
// sends companions with a command, explicitly (see quota.Redis.ChargeWith,
// which sends a tile's cache lookup with its charge).
package redisbatch

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultMaxBatch is the most commands a batch holds unless WithMaxBatch
// says otherwise.
const DefaultMaxBatch = 256

// DefaultMaxInFlight is how many round trips may be out at once unless
// WithMaxInFlight says otherwise: with two, Redis reads the next batch
// while the client reads the replies of the last.
const DefaultMaxInFlight = 2

// client is what Enable needs: a *redis.Client, a *redis.ClusterClient
// or a *redis.Ring.
type client interface {
	AddHook(redis.Hook)
	Pipeline() redis.Pipeliner
}

var (
	_ client = (*redis.Client)(nil)
	_ client = (*redis.ClusterClient)(nil)
	_ client = (*redis.Ring)(nil)
)

// Batcher is the hook Enable installs. It is safe for concurrent use.
type Batcher struct {
	client      client
	maxBatch    int
	maxInFlight int

	mu       sync.Mutex
	queue    []*call
	inFlight int // round trips out, direct sends included

	trips    atomic.Int64
	commands atomic.Int64
}

// Option configures a Batcher.
type Option func(*Batcher)

// WithMaxBatch sets the most commands one batch holds (default
// DefaultMaxBatch).
func WithMaxBatch(n int) Option { return func(b *Batcher) { b.maxBatch = max(n, 1) } }

// WithMaxInFlight sets how many round trips may be out at once (default
// DefaultMaxInFlight); commands beyond wait for one to return.
func WithMaxInFlight(n int) Option { return func(b *Batcher) { b.maxInFlight = max(n, 1) } }

// Enable makes c batch the concurrent commands sent through it, and
// returns the Batcher for its counts. Call it once a client, before use.
func Enable(c client, opts ...Option) *Batcher {
	b := &Batcher{client: c, maxBatch: DefaultMaxBatch, maxInFlight: DefaultMaxInFlight}
	for _, o := range opts {
		o(b)
	}
	c.AddHook(b)
	return b
}

// Stats counts what a Batcher sent.
type Stats struct {
	// Commands is how many commands went to Redis through the batcher,
	// attached companions included.
	Commands int64
	// RoundTrips is how many pipelines (or single commands) carried them;
	// on a cluster one may reach several nodes at once.
	RoundTrips int64
}

// Stats returns the counts so far.
func (b *Batcher) Stats() Stats {
	return Stats{Commands: b.commands.Load(), RoundTrips: b.trips.Load()}
}

// DialHook is go-redis's, unchanged.
func (b *Batcher) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessPipelineHook batches a caller's pipeline as one member of a
// batch, its commands together, when each may travel in one; the
// batches' own pipelines pass through.
func (b *Batcher) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(batchKey{}) != nil {
			return next(ctx, cmds)
		}
		for _, cmd := range cmds {
			if !batchable(cmd) {
				return next(ctx, cmds)
			}
		}
		return b.process(ctx, cmds, func() error { return next(ctx, cmds) })
	}
}

// ProcessHook batches cmd.
func (b *Batcher) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !batchable(cmd) {
			return next(ctx, cmd)
		}
		return b.process(ctx, []redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

// process sends cmds at once, with direct (no copy, no handoff, the
// client's own deadline handling), if a round trip may start and nothing
// waits; otherwise it queues them for the next batch. It returns the
// first of their errors.
func (b *Batcher) process(ctx context.Context, cmds []redis.Cmder, direct func() error) error {
	b.mu.Lock()
	if b.inFlight < b.maxInFlight && len(b.queue) == 0 {
		b.inFlight++
		b.mu.Unlock()
		b.trips.Add(1)
		b.commands.Add(int64(len(cmds)))
		err := direct()
		b.release()
		return err
	}
	c := newCall(ctx, cmds)
	b.queue = append(b.queue, c)
	start := b.inFlight < b.maxInFlight
	if start {
		b.inFlight++
	}
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	return c.wait(ctx)
}

// batchKey marks the context of a batch's own pipeline.
type batchKey struct{}

// exec sends cmds as one pipeline; each keeps its own error.
func (b *Batcher) exec(ctx context.Context, cmds []redis.Cmder) error {
	p := b.client.Pipeline()
	ctx = context.WithValue(ctx, batchKey{}, true)
	for _, c := range cmds {
		_ = p.Process(ctx, c)
	}
	_, err := p.Exec(ctx)
	return err
}

// release ends a round trip: the queue, if anything waits, goes next on
// the slot it frees.
func (b *Batcher) release() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go b.flush()
}

// flush sends the queue in batches, one after another, while it holds
// anything, then frees its slot.
func (b *Batcher) flush() {
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		b.send(batch)
	}
}

// take removes the next batch from the queue, or frees the slot and
// returns nil when there is none. Calls whose callers have gone are
// dropped unsent.
func (b *Batcher) take() []*call {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*call
	n, i := 0, 0
	for ; i < len(b.queue) && n < b.maxBatch; i++ {
		c := b.queue[i]
		if c.state.CompareAndSwap(queued, sent) {
			batch = append(batch, c)
			n += len(c.copies)
		}
	}
	b.queue = b.queue[i:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	if batch == nil {
		b.inFlight--
	}
	return batch
}

// send runs one batch, until the latest deadline of its callers, and
// answers those still waiting.
func (b *Batcher) send(batch []*call) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	var cmds []redis.Cmder
	for _, c := range batch {
		cmds = append(cmds, c.copies...)
	}
	b.trips.Add(1)
	b.commands.Add(int64(len(cmds)))
	_ = b.exec(ctx, cmds)
	for _, c := range batch {
		c.answer()
	}
}

// batchContext ends at the latest deadline of the batch's callers, or
// never (the client's own timeouts then bound it) if one has none.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// The states of a queued call.
const (
	queued    int32 = iota
	sent            // taken into a batch
	abandoned       // its caller has gone
	answered        // its results are in the caller's commands
)

// call is one queued command, or one caller's pipeline. The batch sends
// copies, so a caller that leaves at its deadline never has its commands
// written to after it returned.
type call struct {
	ctx    context.Context
	origs  []redis.Cmder // the caller's
	copies []redis.Cmder // what the batch sends, one for each
	state  atomic.Int32
	done   chan struct{}
}

func newCall(ctx context.Context, cmds []redis.Cmder) *call {
	c := &call{ctx: ctx, origs: cmds, done: make(chan struct{})}
	c.copies = make([]redis.Cmder, len(c.origs))
	for i, o := range c.origs {
		c.copies[i] = redis.NewCmd(ctx, o.Args()...)
	}
	return c
}

// wait returns the command's error once the batch answered it, or the
// context's as soon as the caller's time is up.
func (c *call) wait(ctx context.Context) error {
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(queued, abandoned) || c.state.CompareAndSwap(sent, abandoned) {
			return ctx.Err()
		}
		<-c.done // being answered this moment
	}
	for _, o := range c.origs {
		if err := o.Err(); err != nil {
			return err
		}
	}
	return nil
}

// answer copies the batch's results into the caller's commands, unless
// the caller has gone.
func (c *call) answer() {
	if !c.state.CompareAndSwap(sent, answered) {
		return
	}
	for i, o := range c.origs {
		copyResult(o, c.copies[i].(*redis.Cmd))
	}
	close(c.done)
}

// batchable reports whether cmd may travel in a batch: its reply type is
// one copyResult can hand over, and it neither blocks nor changes the
// connection's state.
func batchable(cmd redis.Cmder) bool {
	switch cmd.(type) {
	case *redis.Cmd, *redis.StringCmd, *redis.StatusCmd, *redis.IntCmd, *redis.BoolCmd:
	default:
		return false
	}
	return !unbatched[cmd.Name()]
}

// unbatched are the commands of those reply types that block or change
// the connection: they would stall or poison a shared pipeline.
var unbatched = map[string]bool{
	"blmove": true, "brpoplpush": true, "blpop": true, "brpop": true, "bzpopmin": true, "bzpopmax": true,
	"blmpop": true, "bzmpop": true, "wait": true, "waitaof": true, "multi": true, "exec": true,
	"discard": true, "watch": true, "unwatch": true, "select": true, "swapdb": true, "auth": true,
	"hello": true, "client": true, "reset": true, "quit": true, "shutdown": true, "monitor": true,
	"subscribe": true, "psubscribe": true, "ssubscribe": true, "readonly": true, "readwrite": true,
}

// copyResult sets dst's result to that of src, which ran its arguments.
func copyResult(dst redis.Cmder, src *redis.Cmd) {
	if err := src.Err(); err != nil {
		dst.SetErr(err)
		return
	}
	v := src.Val()
	switch d := dst.(type) {
	case *redis.Cmd:
		d.SetVal(v)
	case *redis.StringCmd:
		d.SetVal(text(v))
	case *redis.StatusCmd:
		d.SetVal(text(v))
	case *redis.IntCmd:
		n, ok := v.(int64)
		if !ok {
			d.SetErr(fmt.Errorf("redisbatch: %s replied %T, not an integer", dst.Name(), v))
			return
		}
		d.SetVal(n)
	case *redis.BoolCmd:
		switch x := v.(type) {
		case bool:
			d.SetVal(x)
		case int64:
			d.SetVal(x == 1)
		case string:
			d.SetVal(x == "OK")
		}
	}
}

// text is a reply as a string, as StringCmd and StatusCmd read it.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}
