package quota

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed charge.lua
	chargeLua    string
	chargeScript = redis.NewScript(chargeLua)

	//go:embed settle.lua
	settleLua    string
	settleScript = redis.NewScript(settleLua)
)

// rediser is what Redis needs of a client: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring or any redis.UniversalClient fit.
type rediser interface {
	redis.Scripter
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

var (
	_ rediser = (*redis.Client)(nil)
	_ rediser = (*redis.ClusterClient)(nil)
	_ rediser = (redis.UniversalClient)(nil)
)

// DefaultPrefix starts every key Redis writes.
const DefaultPrefix = "tileapi:q:"

// Redis is a quota store in Redis: one atomic script a decision, so a limit
// holds exactly across every process that shares the server or cluster.
type Redis struct {
	client rediser
	prefix string
	now    func() time.Time
}

// RedisOption configures a Redis store.
type RedisOption func(*Redis)

// WithPrefix sets the prefix of every key (default DefaultPrefix). It must
// not contain braces: they would change the Redis Cluster hash slot.
func WithPrefix(prefix string) RedisOption { return func(r *Redis) { r.prefix = prefix } }

// WithClock makes the store take the time from now instead of from the Redis
// server. It is for tests, which slide windows exactly without sleeping;
// in production the server's clock keeps every process on one timeline.
func WithClock(now func() time.Time) RedisOption { return func(r *Redis) { r.now = now } }

// NewRedis returns a store that keeps its state in client.
// It panics if WithPrefix was given braces, a programming error.
func NewRedis(client rediser, opts ...RedisOption) *Redis {
	r := &Redis{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(r)
	}
	if strings.ContainsAny(r.prefix, "{}") {
		panic("quota: key prefix " + strconv.Quote(r.prefix) + " contains a brace")
	}
	return r
}

// Allow charges a cost of 1: see Charge.
func (r *Redis) Allow(ctx context.Context, identity string, plan Plan) (Decision, error) {
	return r.Charge(ctx, identity, plan, 1)
}

// Charge admits cost units for identity if they fit in every limit of plan,
// and records them in all of them; a denied charge records nothing. A cost
// above a limit's maximum returns a *TooCostlyError; a bad plan or cost an
// error matching ErrInvalid. Both are reported before any I/O.
func (r *Redis) Charge(ctx context.Context, identity string, plan Plan, cost int64) (Decision, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, err
	}
	return r.run(ctx, identity, plan, cost, true)
}

// Peek returns the usage of identity under plan without charging anything.
func (r *Redis) Peek(ctx context.Context, identity string, plan Plan) (Decision, error) {
	if err := checkPeek(identity, plan); err != nil {
		return Decision{}, err
	}
	return r.run(ctx, identity, plan, 0, false)
}

func (r *Redis) run(ctx context.Context, identity string, plan Plan, cost int64, record bool) (Decision, error) {
	keys := r.keys(identity)
	reply, err := chargeScript.Run(ctx, r.client, keys[:], r.chargeArgs(plan, cost, record)...).Text()
	if err != nil {
		return Decision{}, fmt.Errorf("quota: charge: %w", err)
	}
	want := 3 + 4*len(plan.Limits)
	if len(reply) != 8*want {
		return Decision{}, fmt.Errorf("quota: charge: script returned %d bytes, want %d numbers", len(reply), want)
	}
	num := func(i int) int64 {
		return int64(math.Float64frombits(binary.BigEndian.Uint64([]byte(reply[8*i : 8*i+8]))))
	}
	raw := make([]limitUsage, len(plan.Limits))
	for i := range raw {
		raw[i] = limitUsage{used: num(3 + 4*i), oldest: num(4 + 4*i), freeAt: num(5 + 4*i)}
	}
	return decide(identity, plan, cost, num(0) == 1, num(1), num(2), raw), nil
}

// chargeArgs returns the ARGV of charge.lua: the struct format of its
// numbers (and of its reply), the numbers packed as big-endian doubles, and
// the keys' TTL as text, so the script parses and formats no number (that
// is most of what a script costs Redis).
func (r *Redis) chargeArgs(plan Plan, cost int64, record bool) []any {
	n := 3 + 4*len(plan.Limits)
	packed := make([]byte, 0, 8*n)
	put := func(v int64) { packed = binary.BigEndian.AppendUint64(packed, math.Float64bits(float64(v))) }
	put(boolNum(record))
	put(cost)
	put(r.nowMicros())
	var longest time.Duration
	for _, l := range plan.Limits {
		put(l.Window.Microseconds())
		put(l.Max)
		put(0) // the state has four numbers a limit; the arguments use two
		put(0)
		longest = max(longest, l.Window)
	}
	return []any{structFormat(n), packed, strconv.FormatInt(longest.Milliseconds(), 10)}
}

// structFormats holds the struct formats of plans of up to 8 limits, so a
// decision builds none.
var structFormats = func() (f [3 + 4*8 + 1]string) {
	for i := range f {
		f[i] = ">" + strings.Repeat("d", i)
	}
	return f
}()

func structFormat(n int) string {
	if n < len(structFormats) {
		return structFormats[n]
	}
	return ">" + strings.Repeat("d", n)
}

// Refund removes an admitted charge. It reports whether it did: false means
// the receipt's charge was already refunded, settled away or has expired, so
// calling it twice is safe.
func (r *Redis) Refund(ctx context.Context, rc Receipt) (bool, error) {
	_, ok, err := r.settle(ctx, rc, 0)
	return ok, err
}

// Settle lowers an admitted charge to the actual cost, once the work is done
// and its real price known, and returns the receipt of the lowered charge.
// Raising a charge is refused: admitting more than was checked would break
// the limit. Settling to 0 is a refund. A receipt whose charge is gone
// reports false and changes nothing.
func (r *Redis) Settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	return r.settle(ctx, rc, actual)
}

func (r *Redis) settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	if err := checkSettle(rc, actual); err != nil {
		return Receipt{}, false, err
	}
	keys := r.keys(rc.identity)
	member, err := settleScript.Run(ctx, r.client, keys[:], rc.member, actual).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return Receipt{}, false, nil
	case err != nil:
		return Receipt{}, false, fmt.Errorf("quota: settle: %w", err)
	case member == "":
		return Receipt{}, true, nil
	}
	return Receipt{identity: rc.identity, member: member, at: rc.at, cost: actual}, true, nil
}

// Reset forgets every charge of identity, under every plan.
func (r *Redis) Reset(ctx context.Context, identity string) error {
	keys := r.keys(identity)
	if err := r.client.Del(ctx, keys[:]...).Err(); err != nil {
		return fmt.Errorf("quota: reset: %w", err)
	}
	return nil
}

// LogKey returns the key of identity's log, for audits such as the load
// tool's exactness check: a sorted set with one entry per admitted charge
// still in some window (and up to 15 that have left all of them), scored by
// its admit time in microseconds; ParseLogEntry reads its members.
func (r *Redis) LogKey(identity string) string { return r.keys(identity)[0] }

// keys returns the log and state keys of identity. Both carry the escaped
// identity as their hash tag, so they share a Redis Cluster slot. The "2"
// is the layout's version: keys of an older layout are never read, and
// expire on their own.
func (r *Redis) keys(identity string) [2]string {
	base := r.prefix + "{" + escapeIdentity(identity) + "}:"
	both := base + "l2" + base + "s2" // one allocation for the two
	return [2]string{both[:len(both)/2], both[len(both)/2:]}
}

// nowMicros is the injected clock's time, or -1 for the script to read
// Redis TIME.
func (r *Redis) nowMicros() int64 {
	if r.now == nil {
		return -1
	}
	return r.now().UnixMicro()
}

func boolNum(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
