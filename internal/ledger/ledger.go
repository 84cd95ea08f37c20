// Package ledger keeps the usage ledger in PostgreSQL: what each quota
// identity used in each calendar period of each period limit (a day, a
// month), as every server's charges, refunds and settlements add up. It is
// written behind the requests, in batches, and read back to restore a
// counter that Redis lost (a quota.PeriodSource), so what a customer buys
// by the month survives losing Redis.
//
// After each write, the counters in Redis of the rows written are raised
// to at least the ledger's totals (RaiseIn): a Redis that kept a counter
// but lost its latest writes (a failover to a lagging replica, a restart
// from an older snapshot) is brought back up within a flush interval, as
// one that lost the counter is restored before its next charge.
//
// What can still be lost is what no server had written when Redis lost it:
// at most one flush interval of each server's charges (and a batch it was
// retrying), and of a server that dies, what it held unwritten. The other
// way, a restore or a raise counts too much by the refunds and settlements
// other servers held unwritten when Redis lost them (they were made in the
// Redis that was lost, and a counter is never lowered), for the rest of
// the period: the customer loses those units, nothing is served over.
//
// The batches also carry the usage history (AddUsage, internal/usage):
// each identity's requests, units and refusals per hour, route and layer,
// written to usage_hourly in the batch's transaction, so a batch applied
// once writes them once.
package ledger

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota"
)

// Defaults of Options.
const (
	DefaultFlushEvery = time.Second
	DefaultMaxPending = 100_000
)

// Options configures a Ledger; a zero field takes its default.
type Options struct {
	// FlushEvery is how often the units recorded are written.
	FlushEvery time.Duration
	// MaxPending bounds the (identity, period) rows held unwritten; past
	// it a row not yet held is dropped and counted (Stats.Dropped).
	MaxPending int
	// Logger receives failed writes; nil discards them.
	Logger *slog.Logger
}

// Ledger records units per identity and period and writes them to the
// quota_ledger table (migrations/00007_quota_ledger.sql). It is safe for
// concurrent use.
type Ledger struct {
	pool *pgxpool.Pool
	opt  Options

	floor floor // the counters raised to the ledger's totals; nil for none

	mu      sync.Mutex
	pending map[row]int64           // recorded since the last batch was formed
	usage   map[usage.Key]usage.Row // the usage history recorded since then
	retry   *batch                  // a batch whose write failed, sent again first
	stats   Stats
}

// floor is what RaiseIn needs of a store: *quota.Redis.
type floor interface {
	RaisePeriods(ctx context.Context, periods map[string][]quota.PeriodUnits) (int, error)
}

var _ floor = (*quota.Redis)(nil)

// RaiseIn makes every write raise the counters of the rows it wrote in r
// to at least the ledger's totals. Call it before Run.
func (l *Ledger) RaiseIn(r *quota.Redis) { l.floor = r }

// Stats counts what a Ledger did.
type Stats struct {
	Batches  int64 // batches written
	Failures int64 // failed writes, each retried
	Dropped  int64 // rows (of periods, or of usage history) dropped for MaxPending
	Raised   int64 // counters in Redis found behind the ledger and raised
	// Written is when the last flush that wrote everything recorded
	// began: what was recorded before it is in the database. A restore
	// after a loss of Redis's counters misses at most what was charged
	// since.
	Written time.Time
}

// row is one identity's period of one limit.
type row struct {
	identity, limit string
	start           int64 // microseconds since the Unix epoch
}

// batch is a set of rows with the id it is applied once by.
type batch struct {
	id    string
	units map[row]int64
	usage map[usage.Key]usage.Row
}

// New returns a Ledger writing to pool, whose database has the migrations
// applied. Run writes what it records.
func New(pool *pgxpool.Pool, opt Options) *Ledger {
	if opt.FlushEvery <= 0 {
		opt.FlushEvery = DefaultFlushEvery
	}
	if opt.MaxPending <= 0 {
		opt.MaxPending = DefaultMaxPending
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ledger{pool: pool, opt: opt, pending: make(map[row]int64), usage: make(map[usage.Key]usage.Row)}
}

// Record adds units (negative for units given back) to every period rc's
// charge was counted in, in every part of it: the charged identity's and
// each shared identity's (quota.Receipt.Shared, such as a key's customer),
// so that a customer's month survives a loss of Redis as a key's does. It
// does no I/O.
func (l *Ledger) Record(rc quota.Receipt, units int64) {
	if units == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, part := range append([]quota.Receipt{rc}, rc.Shared()...) {
		for _, p := range part.Periods() {
			r := row{identity: part.Identity(), limit: p.Limit, start: p.Start.UnixMicro()}
			if _, held := l.pending[r]; !held && len(l.pending) >= l.opt.MaxPending {
				l.stats.Dropped++
				continue
			}
			l.pending[r] += units
		}
	}
}

// AddUsage adds r to the usage history written with the next batch
// (usage_hourly), in its transaction: a batch applied once writes its
// usage once. It does no I/O. Like the periods, the rows held unwritten
// are bounded by MaxPending.
func (l *Ledger) AddUsage(r usage.Row) {
	k := usage.KeyOf(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if held, ok := l.usage[k]; ok {
		held.Add(r)
		l.usage[k] = held
		return
	}
	if len(l.usage) >= l.opt.MaxPending {
		l.stats.Dropped++
		return
	}
	l.usage[k] = r
}

var _ usage.Recorder = (*Ledger)(nil)

// Stats returns what the ledger did so far.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Run writes what is recorded every FlushEvery until ctx is done, then
// once more, within 5 s, so a server that stops writes what it holds.
func (l *Ledger) Run(ctx context.Context) {
	t := time.NewTicker(l.opt.FlushEvery)
	defer t.Stop()
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	for {
		select {
		case <-prune.C:
			if _, err := l.pool.Exec(ctx, pruneSQL); err != nil && ctx.Err() == nil {
				l.opt.Logger.Warn("ledger: pruning old batch ids failed", "err", err)
			}
		case <-t.C:
			if err := l.Flush(ctx); err != nil && ctx.Err() == nil {
				l.opt.Logger.Warn("ledger: write failed; retried at the next flush", "err", err)
			}
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := l.Flush(final); err != nil {
				l.opt.Logger.Error("ledger: the last write before stopping failed: its units are lost from the ledger", "err", err)
			}
			cancel()
			return
		}
	}
}

// Flush writes every batch recorded before it began: first a batch that
// failed before, with its id, then what was recorded since. What is
// recorded while they are written waits for the next flush: under load a
// flush that went on until nothing was pending would write batch after
// batch, a few rows each, where one a FlushEvery would do. A batch is
// applied once, however often it is sent.
func (l *Ledger) Flush(ctx context.Context) error {
	start := time.Now()
	for {
		b, retried := l.next()
		if b == nil {
			break
		}
		totals, err := l.write(ctx, b)
		l.mu.Lock()
		if err != nil {
			l.retry = b
			l.stats.Failures++
		} else {
			l.stats.Batches++
		}
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if err := l.raise(ctx, totals); err != nil {
			// Not retried: the rows are raised again when next written.
			l.opt.Logger.Warn("ledger: raising Redis's counters to the ledger failed", "err", err)
		}
		if !retried {
			break // what was pending at the start is written
		}
	}
	l.mu.Lock()
	l.stats.Written = start
	l.mu.Unlock()
	return nil
}

// raise raises the counters in Redis to the totals a write returned.
func (l *Ledger) raise(ctx context.Context, totals map[string][]quota.PeriodUnits) error {
	if l.floor == nil || len(totals) == 0 {
		return nil
	}
	n, err := l.floor.RaisePeriods(ctx, totals)
	l.mu.Lock()
	l.stats.Raised += int64(n)
	l.mu.Unlock()
	return err
}

// next returns the batch to write: the one to retry (retried), or else
// what is pending, given a new id; nil when there is nothing.
func (l *Ledger) next() (*batch, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.retry; b != nil {
		l.retry = nil
		return b, true
	}
	if len(l.pending) == 0 && len(l.usage) == 0 {
		return nil, false
	}
	b := &batch{id: newID(), units: l.pending, usage: l.usage}
	l.pending = make(map[row]int64, len(b.units))
	l.usage = make(map[usage.Key]usage.Row, len(b.usage))
	return b, false
}

const (
	// claimSQL records a batch's id; it inserts nothing for a batch
	// applied before.
	claimSQL = `INSERT INTO quota_ledger_batches (id) VALUES ($1) ON CONFLICT DO NOTHING`
	// addSQL adds a batch's units to the ledger's rows.
	addSQL = `INSERT INTO quota_ledger (identity, limit_name, period_start, units)
SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[])
ON CONFLICT (identity, limit_name, period_start)
DO UPDATE SET units = quota_ledger.units + EXCLUDED.units, updated_at = now()
RETURNING identity, limit_name, period_start, units`
	// addUsageSQL adds a batch's usage history to its hours' rows.
	addUsageSQL = `INSERT INTO usage_hourly AS h (identity, key_id, customer_id, hour, route, layer, requests,
    units_charged, units_given_back, units_unmetered, units_overage, refused_429, refused_422)
SELECT i, nullif(k, 0), nullif(c, 0), t, r, l, n, ch, gb, um, ov, r429, r422
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::bigint[],
            $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[])
     AS u(i, k, c, t, r, l, n, ch, gb, um, ov, r429, r422)
ON CONFLICT (identity, hour, route, layer) DO UPDATE SET
  requests = h.requests + EXCLUDED.requests,
  units_charged = h.units_charged + EXCLUDED.units_charged,
  units_given_back = h.units_given_back + EXCLUDED.units_given_back,
  units_unmetered = h.units_unmetered + EXCLUDED.units_unmetered,
  units_overage = h.units_overage + EXCLUDED.units_overage,
  refused_429 = h.refused_429 + EXCLUDED.refused_429,
  refused_422 = h.refused_422 + EXCLUDED.refused_422`
	// pruneSQL forgets batch ids far older than any retry.
	pruneSQL = `DELETE FROM quota_ledger_batches WHERE applied_at < now() - interval '7 days'`
	// usageSQL reads the units of an identity's periods, in their order,
	// 0 for a period it has no row of.
	usageSQL = `SELECT coalesce(l.units, 0)
FROM unnest($2::text[], $3::timestamptz[]) WITH ORDINALITY AS p(limit_name, period_start, i)
LEFT JOIN quota_ledger l ON l.identity = $1 AND l.limit_name = p.limit_name AND l.period_start = p.period_start
ORDER BY p.i`
)

// write applies b in one transaction: its id first, so that a batch
// already applied (its commit's answer lost) changes nothing. It returns
// the ledger's totals of the rows it wrote, by identity (none for a batch
// applied before).
func (l *Ledger) write(ctx context.Context, b *batch) (map[string][]quota.PeriodUnits, error) {
	n := len(b.units)
	ids, limits, starts, units := make([]string, 0, n), make([]string, 0, n), make([]time.Time, 0, n), make([]int64, 0, n)
	for r, u := range b.units {
		ids, limits = append(ids, r.identity), append(limits, r.limit)
		starts, units = append(starts, time.UnixMicro(r.start)), append(units, u)
	}
	totals := make(map[string][]quota.PeriodUnits)
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, claimSQL, b.id)
		if err != nil || tag.RowsAffected() == 0 {
			return err // applied before: nothing more to do
		}
		if err := writeUsage(ctx, tx, b.usage); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, addSQL, ids, limits, starts, units)
		if err != nil {
			return err
		}
		var identity string
		var p quota.PeriodUnits
		_, err = pgx.ForEachRow(rows, []any{&identity, &p.Limit, &p.Start, &p.Units}, func() error {
			totals[identity] = append(totals[identity], p)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: write %d rows and %d of usage: %w", n, len(b.usage), err)
	}
	return totals, nil
}

// writeUsage adds the usage history rows to usage_hourly in tx.
func writeUsage(ctx context.Context, tx pgx.Tx, rows map[usage.Key]usage.Row) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	ids, routes, layers, hours := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]time.Time, 0, n)
	var counts [9][]int64 // key, customer, then the seven counts
	for _, r := range rows {
		ids, routes, layers, hours = append(ids, r.Identity), append(routes, r.Route), append(layers, r.Layer), append(hours, r.Start)
		for i, v := range [9]int64{r.KeyID, r.CustomerID, r.Requests, r.Charged, r.GivenBack, r.Unmetered, r.Overage, r.Refused429, r.Refused422} {
			counts[i] = append(counts[i], v)
		}
	}
	_, err := tx.Exec(ctx, addUsageSQL, ids, counts[0], counts[1], hours, routes, layers,
		counts[2], counts[3], counts[4], counts[5], counts[6], counts[7], counts[8])
	return err
}

// PeriodUsage returns the units identity used in each of periods: the
// ledger's, with what this server holds unwritten (a restore should not
// forget its own latest charges). It makes Ledger a quota.PeriodSource.
func (l *Ledger) PeriodUsage(ctx context.Context, identity string, periods []quota.PeriodKey) ([]int64, error) {
	limits, starts := make([]string, len(periods)), make([]time.Time, len(periods))
	for i, p := range periods {
		limits[i], starts[i] = p.Limit, p.Start
	}
	rows, err := l.pool.Query(ctx, usageSQL, identity, limits, starts)
	if err != nil {
		return nil, fmt.Errorf("ledger: usage: %w", err)
	}
	units, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("ledger: usage: %w", err)
	}
	if len(units) != len(periods) {
		return nil, errors.New("ledger: usage: a row per period was not returned")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range periods {
		r := row{identity: identity, limit: p.Limit, start: p.Start.UnixMicro()}
		units[i] += l.pending[r]
		if l.retry != nil {
			units[i] += l.retry.units[r]
		}
	}
	return units, nil
}

var _ quota.PeriodSource = (*Ledger)(nil)

// newID returns a random UUID (version 4), a batch's id.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Store returns s with every admitted charge, refund and settlement made
// through it recorded in l.
func (l *Ledger) Store(s quota.Store) quota.Store { return &recording{Store: s, ledger: l} }

// recording is a quota.Store that records what it charges and gives back.
type recording struct {
	quota.Store
	ledger *Ledger
}

func (s *recording) Allow(ctx context.Context, identity string, plan quota.Plan) (quota.Decision, error) {
	return s.Charge(ctx, identity, plan, 1)
}

func (s *recording) Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error) {
	d, err := s.Store.Charge(ctx, identity, plan, cost)
	s.admitted(d, err)
	return d, err
}

// admitted records d, a charge's decision, if it was admitted.
func (s *recording) admitted(d quota.Decision, err error) {
	if err == nil && d.Allowed {
		s.ledger.Record(d.Receipt, d.Receipt.Cost())
	}
}

// ChargeWith passes a charge with commands along it on to the store, if
// it sends them (quota.Redis, or a deny cache in front of it: one round
// trip), and records it if admitted; otherwise it charges alone and
// reports the commands not sent.
func (s *recording) ChargeWith(ctx context.Context, identity string, plan quota.Plan, cost int64, along ...redis.Cmder) (quota.Decision, bool, error) {
	with, ok := s.Store.(interface {
		ChargeWith(ctx context.Context, identity string, plan quota.Plan, cost int64, along ...redis.Cmder) (quota.Decision, bool, error)
	})
	if !ok {
		d, err := s.Charge(ctx, identity, plan, cost)
		return d, false, err
	}
	d, sent, err := with.ChargeWith(ctx, identity, plan, cost, along...)
	s.admitted(d, err)
	return d, sent, err
}

// ChargeHolding passes a charge that takes an in-flight slot in its script
// on to the store, if it takes them (quota.Redis does), and records it if
// admitted. A store that takes none returns an error matching
// quota.ErrInvalid.
func (s *recording) ChargeHolding(ctx context.Context, identity string, plan quota.Plan, cost int64, slot quota.Slot, along ...redis.Cmder) (quota.Decision, bool, error) {
	h, ok := s.Store.(interface {
		ChargeHolding(ctx context.Context, identity string, plan quota.Plan, cost int64, slot quota.Slot, along ...redis.Cmder) (quota.Decision, bool, error)
	})
	if !ok {
		return quota.Decision{}, false, fmt.Errorf("%w: ledger: a %T takes no in-flight slots", quota.ErrInvalid, s.Store)
	}
	d, sent, err := h.ChargeHolding(ctx, identity, plan, cost, slot, along...)
	s.admitted(d, err)
	return d, sent, err
}

// ChargeOverdraft passes the pending charge of a request served while
// Redis failed on to the store, if it makes them (quota.Redis does), and
// records it once made: a retry Redis finds made already is not recorded
// again. A store that makes none returns an error matching
// quota.ErrInvalid.
func (s *recording) ChargeOverdraft(ctx context.Context, identity string, plan quota.Plan, cost int64, id string) (quota.Decision, bool, error) {
	o, ok := s.Store.(interface {
		ChargeOverdraft(ctx context.Context, identity string, plan quota.Plan, cost int64, id string) (quota.Decision, bool, error)
	})
	if !ok {
		return quota.Decision{}, false, fmt.Errorf("%w: ledger: a %T makes no overdraft charges", quota.ErrInvalid, s.Store)
	}
	d, made, err := o.ChargeOverdraft(ctx, identity, plan, cost, id)
	if made {
		s.ledger.Record(d.Receipt, d.Receipt.Cost())
	}
	return d, made, err
}

func (s *recording) Refund(ctx context.Context, rc quota.Receipt) (bool, error) {
	ok, err := s.Store.Refund(ctx, rc)
	if ok {
		s.ledger.Record(rc, -rc.Cost())
	}
	return ok, err
}

func (s *recording) Settle(ctx context.Context, rc quota.Receipt, actual int64) (quota.Receipt, bool, error) {
	got, ok, err := s.Store.Settle(ctx, rc, actual)
	if ok {
		s.ledger.Record(rc, actual-rc.Cost())
	}
	return got, ok, err
}
