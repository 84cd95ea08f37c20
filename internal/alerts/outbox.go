package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Options.
const (
	DefaultRetryBase   = 10 * time.Second
	DefaultRetryMax    = time.Hour
	DefaultGiveUpAfter = 24 * time.Hour
	DefaultPoll        = 5 * time.Second
	DefaultTimeout     = 10 * time.Second
)

// Options configures an Outbox; a zero duration takes its default.
type Options struct {
	// URL is the webhook's; Secret signs its deliveries (at least
	// MinSecret bytes).
	URL    string
	Secret string
	// RetryBase is the wait after a first failed delivery; it doubles at
	// each failure up to RetryMax, each wait drawn between half of it and
	// all of it (jitter), so that receivers back from an outage are not
	// hit by every server at once.
	RetryBase, RetryMax time.Duration
	// GiveUpAfter is how long after its claim an event is retried; past
	// it a failed delivery abandons it (logged).
	GiveUpAfter time.Duration
	// Poll is how often Run looks for events due, besides when Claim
	// wakes it.
	Poll time.Duration
	// Timeout bounds one delivery.
	Timeout time.Duration
	// Client sends the deliveries; nil is a client of its own.
	Client *http.Client
	// Logger receives failed and abandoned deliveries; nil discards them.
	Logger *slog.Logger
}

// Outbox claims events in the alert_events table and delivers them. It is
// safe for concurrent use, and any number of servers may run one on the
// same table: each event is claimed once, and delivered by one of them at
// a time.
type Outbox struct {
	pool *pgxpool.Pool
	opt  Options
	wake chan struct{}
}

// CheckURL reports a webhook URL that is not an absolute http or https
// URL; the error does not show it, which may hold credentials.
func CheckURL(webhook string) error {
	if u, err := url.Parse(webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("alerts: the webhook URL must be an http or https URL")
	}
	return nil
}

// New returns an Outbox on pool that delivers to opt.URL.
func New(pool *pgxpool.Pool, opt Options) (*Outbox, error) {
	if err := CheckURL(opt.URL); err != nil {
		return nil, err
	}
	if len(opt.Secret) < MinSecret {
		return nil, fmt.Errorf("alerts: the signing secret has %d bytes, want at least %d", len(opt.Secret), MinSecret)
	}
	for _, d := range []struct {
		p   *time.Duration
		def time.Duration
	}{{&opt.RetryBase, DefaultRetryBase}, {&opt.RetryMax, DefaultRetryMax}, {&opt.GiveUpAfter, DefaultGiveUpAfter}, {&opt.Poll, DefaultPoll}, {&opt.Timeout, DefaultTimeout}} {
		if *d.p <= 0 {
			*d.p = d.def
		}
	}
	if opt.Client == nil {
		opt.Client = &http.Client{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Outbox{pool: pool, opt: opt, wake: make(chan struct{}, 1)}, nil
}

// claimSQL inserts an event unless its (identity, limit, period,
// threshold) is claimed already.
const claimSQL = `
INSERT INTO alert_events (id, identity, limit_name, period_start, threshold, body, created_at)
VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))
ON CONFLICT DO NOTHING`

// Claim records e, its ID and Type and Created filled in, to be delivered,
// unless its threshold of its limit and period is claimed already (by any
// server); it reports whether this call claimed it.
func (o *Outbox) Claim(ctx context.Context, e Event) (bool, error) {
	e.ID = EventID(e.Identity, e.Limit, e.PeriodStart, e.Threshold)
	e.Type = TypeThreshold
	e.Created = time.Now().Unix()
	e.PeriodStart, e.PeriodEnd = e.PeriodStart.UTC(), e.PeriodEnd.UTC()
	body, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("alerts: %w", err)
	}
	tag, err := o.pool.Exec(ctx, claimSQL, e.ID, e.Identity, e.Limit, e.PeriodStart, e.Threshold, string(body), e.Created)
	if err != nil {
		return false, fmt.Errorf("alerts: claim: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true, nil
}

// Run delivers the events due until ctx is done: at once after a Claim of
// this Outbox, and every Poll for those of other servers and the retries.
func (o *Outbox) Run(ctx context.Context) {
	t := time.NewTicker(o.opt.Poll)
	defer t.Stop()
	for {
		for {
			sent, err := o.deliverOne(ctx)
			if err != nil && ctx.Err() == nil {
				o.opt.Logger.ErrorContext(ctx, "alerts: reading the events to deliver failed", "err", err)
			}
			if !sent {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.wake:
		}
	}
}

// dueSQL picks one event due, locked, skipping those another server is
// delivering.
const dueSQL = `
SELECT id, body, attempts, created_at FROM alert_events
WHERE delivered_at IS NULL AND abandoned_at IS NULL AND next_attempt_at <= now()
ORDER BY next_attempt_at
LIMIT 1
FOR UPDATE SKIP LOCKED`

const (
	deliveredSQL = `UPDATE alert_events SET delivered_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = $1`
	failedSQL    = `UPDATE alert_events SET attempts = attempts + 1, last_error = $2,
	next_attempt_at = now() + make_interval(secs => $3), abandoned_at = CASE WHEN $4 THEN now() END WHERE id = $1`
)

// deliverOne delivers one event due, if there is one, holding its row
// locked meanwhile, and records the outcome; it reports whether it found
// one.
func (o *Outbox) deliverOne(ctx context.Context) (bool, error) {
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var (
		id, body string
		attempts int
		created  time.Time
	)
	err = tx.QueryRow(ctx, dueSQL).Scan(&id, &body, &attempts, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if perr := o.post(ctx, id, []byte(body)); perr == nil {
		_, err = tx.Exec(ctx, deliveredSQL, id)
	} else {
		giveUp := time.Since(created) > o.opt.GiveUpAfter
		wait := o.backoff(attempts)
		_, err = tx.Exec(ctx, failedSQL, id, perr.Error(), wait.Seconds(), giveUp)
		if giveUp {
			o.opt.Logger.ErrorContext(ctx, "alerts: delivery abandoned", "id", id, "attempts", attempts+1, "err", perr)
		} else {
			o.opt.Logger.WarnContext(ctx, "alerts: delivery failed; retrying", "id", id, "attempts", attempts+1, "retry_in", wait, "err", perr)
		}
	}
	if err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// backoff is the wait after a failed delivery that had failed attempts
// times before: RetryBase doubled each time up to RetryMax, drawn between
// half of it and all of it.
func (o *Outbox) backoff(attempts int) time.Duration {
	d := o.opt.RetryMax
	if attempts < 40 {
		d = min(o.opt.RetryBase<<attempts, o.opt.RetryMax)
	}
	return d/2 + rand.N(d/2+1)
}

// post sends body, signed now, to the webhook: an error unless it answers
// 2xx within Timeout.
func (o *Outbox) post(ctx context.Context, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, o.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.opt.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(o.opt.Secret, time.Now(), body))
	req.Header.Set(EventIDHeader, id)
	resp, err := o.opt.Client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err // without the URL, which may hold credentials
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
