// Package quotahttp gates net/http handlers with exact, cost-weighted
// quotas: each request is priced before its work, charged to its caller's
// plan, and refused with 429 when the price does not fit.
//
// # The model
//
// A caller (an API key, a user, a client address) has a [quota.Plan]: one
// or more limits, each a maximum number of units over a sliding window (300
// units a minute, 60 in any 5 seconds) or a calendar period (100,000 a
// month). A request has a cost in units, chosen before its work: a search
// over a larger area, an export of more rows, a call to a larger model
// costs more. The gate admits the request only if its cost fits in every
// limit of the plan; an admitted request is charged in all of them, a
// refused one in none.
//
// The store keeps, per caller, a log of the charges still inside the
// longest window, so the sum over any trailing window is exact: a client
// can never send more than a limit's maximum in any window of its length,
// not even across a boundary (a fixed window lets it send twice as much),
// and a refusal carries the exact time at which the same cost fits again.
// [quota.Redis] holds one limit exactly across any number of servers (one
// atomic Lua script a decision, on a single node or a Redis Cluster);
// [quota.Memory] holds it within one process.
//
// An admitted charge has a receipt. The gate uses it to refund the charge
// when the handler fails (a 5xx or 499 status, a panic, a client gone
// before the work) and to settle it: a handler that learns its real cost
// while it works (rows scanned, time taken) lowers the charge with [Settle]
// before it writes its response. A handler reads what the gate decided
// with [FromContext].
//
// # Headers and errors
//
// Every metered response carries the fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit-Policy and RateLimit,
// one entry per limit), the older X-RateLimit-Limit, -Remaining and -Reset
// of the binding limit, X-RateLimit-Cost and, on a refusal, Retry-After;
// [WithHeaders] chooses which. Their q and r count quota units, not
// requests: a request costs its price (X-RateLimit-Cost), so a client
// that can afford r units can send r / price more such requests. No qu
// parameter says so: the draft's registry has no unit for weighted
// requests, and allows no other. A policy's w is its window, or for a
// calendar period the length of the current one (a 23-hour day, a 31-day
// month); a state's t is the draft's effective window, the seconds within
// which the caller can use no more than r: until the oldest charge leaves
// the window (w for an empty one) or the period ends, never more than w.
// No pk parameter is sent: every field is about the caller that made the
// request, whose quota its own key names.
//
// X-Quota-Status says how the request was metered (a [Status]), on every
// response the gate has priced: refusals (429, 422 and 503 failing
// closed) say refused; a request admitted past the max of a soft limit
// ([quota.Limit.Soft]) says overage, and that limit's r in RateLimit is
// 0. A soft limit refuses nothing, so it is never the binding limit of
// X-RateLimit-*: that is the one that would refuse first.
// Refusals are RFC 9457 problem+json bodies by default; [WithErrorHandler]
// writes them as the service likes, from typed errors: [*DeniedError],
// [*quota.TooCostlyError], [*UnavailableError] and whatever the caller's own
// functions return.
//
// # Failures of the store
//
// Every call of the store is bounded by a time budget ([WithTimeout],
// default 50ms). If the store fails or runs out of it, the gate fails open
// (serves the request unmetered) unless [WithFailClosed] makes it answer
// 503. Failing open never forgets: once the work is served, its charge is
// owed (X-Quota-Status: unmetered-pending) and made when the store answers
// again, in every limit and period whether it fits or not, so a client
// served while the store was down pays for it, as an overdraft if need be.
// Each pending charge has an id the store makes it once by
// ([quota.Redis.ChargeOverdraft]): a retry whose first try was made, its
// answer lost, is not counted twice. One goroutine a gate retries the
// pending charges and the refunds that did not answer in time, while any
// are owed; [WithPendingLimit] bounds them (beyond it a request is served
// unmetered with nothing owed, X-Quota-Status: unmetered, as with a store
// that cannot charge later). One case is counted twice: a charge that
// Redis made in time but whose answer reached the gate after the budget
// (a loaded server) is also owed, so at most the request's price more.
// A charge that Redis answers within the budget, saying it reached it too
// late to be made ([quota.ErrLate]: nothing was charged), is tried again
// on a budget of its own, up to three tries: Redis is alive, and the time
// went to reaching it, as on a machine busy to saturation. So a request
// waits at most one budget for a Redis that does not answer, and at most
// three for one that answers late.
// [WithShadow] computes and reports every decision but refuses nothing,
// for trying a plan on live traffic.
package quotahttp
