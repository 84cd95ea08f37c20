// Package history records the decisions of quota stores under load and
// faults and checks the whole history against a model of the sliding-window
// quota, as Jepsen checks a database: it does not trust what any one
// decision said, it asks whether some serial order of every admitted charge
// could have admitted them all.
//
// A Recorder wraps each server's quota.Store (Recorder.Store) and keeps
// every charge (identity, plan, cost, outcome, the Redis time it was
// admitted at and the usage it reported), every refund and settlement, and
// the faults a test causes (Recorder.Fault). Check then orders each
// identity's admitted charges by their Redis admit time and checks:
//
//   - Safety, over sliding windows: for every admitted charge at time t
//     under plan P and every sliding limit L of P, the admitted cost in
//     (t-L.Window, t] is at most L.Max. It counts the charges of every plan,
//     not only P's: a change of plan must not forget history (quota.Plan.History).
//   - Safety, over calendar periods: the units admitted in each (identity,
//     period) up to each charge are at most the charging plan's maximum,
//     plus, after a fault, what the durable copy of the periods may have
//     lost (Options.PeriodLoss).
//   - Counting: each admitted charge's reported usage is at least the
//     model's, so a store that forgets charges is caught before it over-admits.
//   - Liveness, reported but not a violation: a denial that the model says
//     fits in every limit (a spurious denial).
//
// Every sum of the safety checks is a lower bound of what a serial order of
// the history would have counted, and every sum of the liveness check an
// upper bound, so neither reports what did not happen: see Check for how
// refunds, faults, ties and errors are counted.
//
// The package's tests drive several servers (quota.Redis stores with their
// own clients and usage ledgers in PostgreSQL) on a redis-server they
// restart and on a Redis Cluster they flush, re-planning at random between
// plans of different longest windows. They run a few seconds each by
// default; longer by a flag:
//
//	go test ./internal/history -run TestHistory -history.duration 5m -timeout 30m
package history

import (
	"time"

	"github.com/tileapi/tileapi/quota"
)

// History is every event a Recorder saw, or a hand-made one.
type History struct {
	Charges   []Charge
	Givebacks []Giveback
	Faults    []Fault
}

// Outcome is what became of a charge or a giveback.
type Outcome uint8

// The outcomes.
const (
	// Made: the charge was admitted, or the refund or settlement lowered
	// its charge.
	Made Outcome = iota
	// NotMade: the charge was denied, or failed before it reached the store
	// (quota.ErrLate, a validation error); the giveback found no charge to
	// lower.
	NotMade
	// Unknown: the call failed on its way (a connection lost, a timeout):
	// the store may or may not have made it.
	Unknown
)

// String returns "made", "not made" or "unknown".
func (o Outcome) String() string {
	switch o {
	case Made:
		return "made"
	case NotMade:
		return "not made"
	}
	return "unknown"
}

// Charge is one call to charge a cost.
type Charge struct {
	// ID is the charge's index in History.Charges; givebacks name it.
	ID       int
	Server   string
	Identity string
	Plan     quota.Plan
	Cost     int64
	Outcome  Outcome
	// At is, for a charge made, when the store admitted it by its clock
	// (quota.Receipt.At: Redis TIME), the time its record is counted from.
	At time.Time
	// Periods are the calendar periods a charge made was counted in
	// (quota.Receipt.Periods), in the plan's order of its period limits.
	Periods []quota.PeriodKey
	// Used is the usage of each limit of the plan the decision reported,
	// in plan order (quota.LimitState.Used), and Binding the index of the
	// limit that decided (quota.Decision.Binding); nil and 0 without a
	// decision.
	Used    []int64
	Binding int
	// Sent and Answered are the recorder's clock just before the call and
	// just after its answer.
	Sent, Answered time.Time
	// MadeBy is, for an Unknown charge, the latest time the store could
	// have made it (its context's deadline); zero for no bound.
	MadeBy time.Time
}

// Giveback is one refund or settlement of an admitted charge.
type Giveback struct {
	// Charge is the ID of the charge given back.
	Charge int
	Server string
	// Actual is what remains charged if it is made: 0 for a refund.
	Actual  int64
	Outcome Outcome
	// Sent and Answered are the recorder's clock just before the call and
	// just after its answer: the store lowered the charge in between.
	Sent, Answered time.Time
}

// Fault is something that made the store lose state: a restart without
// persistence, a flush, a failover, a reset of one identity.
type Fault struct {
	// Kind names the fault, for the report: "restart", "flush", "reset"...
	Kind string
	// Identity is the only identity the fault lost, or "" for all of them.
	Identity string
	// Start and End bracket the fault by the recorder's clock: the store
	// still held everything admitted before Start, and had lost it by End.
	Start, End time.Time
	// Uncertain says the fault may not have happened (a reset that
	// failed): the safety checks forget what it would have lost, the
	// liveness check does not.
	Uncertain bool
}
