package quota_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// A plan of 5 units per 10 seconds admits five unit charges, then denies the
// sixth with the exact time at which it would fit.
func ExampleMemory_Charge() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	plan, _ := quota.NewPlan("demo", quota.Limit{Name: "ten-seconds", Max: 5, Window: 10 * time.Second})

	for i := range 6 {
		d, _ := store.Charge(context.Background(), "api-key-1", plan, 1)
		fmt.Printf("charge %d: allowed=%v remaining=%d retry-after=%v\n", i+1, d.Allowed, d.BindingLimit().Remaining, d.RetryAfter)
		now = now.Add(time.Second)
	}
	// Output:
	// charge 1: allowed=true remaining=4 retry-after=0s
	// charge 2: allowed=true remaining=3 retry-after=0s
	// charge 3: allowed=true remaining=2 retry-after=0s
	// charge 4: allowed=true remaining=1 retry-after=0s
	// charge 5: allowed=true remaining=0 retry-after=0s
	// charge 6: allowed=false remaining=0 retry-after=5s
}

// Costs are weighted, and a charge must fit in every limit of the plan: a
// charge denied by the burst limit is not recorded in the minute limit.
func ExampleMemory_Charge_weighted() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	plan, _ := quota.NewPlan("free",
		quota.Limit{Name: "burst", Max: 60, Window: 5 * time.Second},
		quota.Limit{Name: "minute", Max: 300, Window: time.Minute})

	for _, cost := range []int64{25, 25, 25} {
		d, _ := store.Charge(context.Background(), "api-key-1", plan, cost)
		fmt.Printf("cost %d: allowed=%v burst used=%d minute used=%d\n", cost, d.Allowed, d.Limits[0].Used, d.Limits[1].Used)
	}
	// Output:
	// cost 25: allowed=true burst used=25 minute used=25
	// cost 25: allowed=true burst used=50 minute used=50
	// cost 25: allowed=false burst used=50 minute used=50
}

// A soft month (pay as you go) admits what the plan's window admits past
// its max, counted: the receipt says how many units of a charge went past
// it, and the month's remaining stays 0. The minute still refuses.
func ExampleReceipt_Overage() {
	store := quota.NewMemory(nil)
	plan, _ := quota.NewPlan("payg",
		quota.PerMinute(100),
		quota.Limit{Name: "month", Max: 50, Period: quota.Month, Soft: true})

	for _, cost := range []int64{40, 20, 20, 30} {
		d, _ := store.Charge(context.Background(), "api-key-1", plan, cost)
		month := d.Limits[1]
		fmt.Printf("cost %d: allowed=%v month used=%d remaining=%d overage=%d\n", cost, d.Allowed, month.Used, month.Remaining, d.Receipt.Overage())
	}
	// Output:
	// cost 40: allowed=true month used=40 remaining=10 overage=0
	// cost 20: allowed=true month used=60 remaining=0 overage=10
	// cost 20: allowed=true month used=80 remaining=0 overage=20
	// cost 30: allowed=false month used=80 remaining=0 overage=0
}

// A cost that no state of the plan could ever admit is an error, not a
// denial: there is no time worth retrying at.
func ExampleTooCostlyError() {
	store := quota.NewMemory(nil)
	plan, _ := quota.NewPlan("free", quota.PerMinute(300))

	_, err := store.Charge(context.Background(), "api-key-1", plan, 500)
	var tc *quota.TooCostlyError
	fmt.Println(errors.As(err, &tc), tc.Cost, tc.Limit)
	// Output: true 500 300 per 1m0s (minute)
}

// When the work turns out cheaper than charged, or fails, the charge is
// settled down or refunded by its receipt.
func ExampleMemory_Settle() {
	ctx := context.Background()
	store := quota.NewMemory(nil)
	plan, _ := quota.NewPlan("free", quota.PerMinute(300))

	d, _ := store.Charge(ctx, "api-key-1", plan, 40)
	rc, _, _ := store.Settle(ctx, d.Receipt, 10)
	u, _ := store.Peek(ctx, "api-key-1", plan)
	fmt.Println("after settle:", u.Limits[0].Used)

	store.Refund(ctx, rc)
	u, _ = store.Peek(ctx, "api-key-1", plan)
	fmt.Println("after refund:", u.Limits[0].Used)
	// Output:
	// after settle: 10
	// after refund: 0
}

func ExampleLimit_String() {
	fmt.Println(quota.PerSecond(10))
	fmt.Println(quota.Limit{Name: "burst", Max: 60, Window: 5 * time.Second})
	// Output:
	// 10 per 1s (second)
	// 60 per 5s (burst)
}

// With Redis, one limit holds across every process that shares the server
// or cluster. Its client must not retry a command (a retried charge could
// be made twice) and must bound each one by its context's deadline (the
// caller's time budget); redis.NewClusterClient takes the same two
// options.
func ExampleNewRedis() {
	opt, err := redis.ParseURL(redisURL()) // such as redis://127.0.0.1:6379/0
	if err != nil {
		log.Fatal(err)
	}
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	defer client.Close()
	store := quota.NewRedis(client, quota.WithPrefix(examplePrefix()))
	plan, _ := quota.NewPlan("pro", quota.Limit{Name: "burst", Max: 200, Window: 5 * time.Second}, quota.PerMinute(2000))

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, err := store.Charge(ctx, "api-key-1", plan, 12)
	if err != nil {
		fmt.Println(err) // Redis failed: the caller's failure policy decides
		return
	}
	fmt.Println(d.Allowed, d.BindingLimit().Limit.Name, d.BindingLimit().Remaining)
	// Output: true burst 188
}

// redisURL is the Redis the examples run against; a program reads its
// own from its configuration.
func redisURL() string { return quotatest.ExampleURL() }

// examplePrefix keeps each run's keys apart from those of every other
// run, test and program sharing the Redis.
func examplePrefix() string { return fmt.Sprintf("example:%d:", time.Now().UnixNano()) }

// A day or a month counts from midnight, or the first of the month, in the
// plan's time zone: the day Paris's clocks go forward is 23 hours long.
func ExamplePeriod_Bounds() {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2027, 3, 28, 12, 0, 0, 0, paris)
	start, end := quota.Day.Bounds(at, paris)
	fmt.Println(start.Format(time.RFC3339), end.Sub(start))
	start, end = quota.Month.Bounds(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), nil)
	fmt.Println(start.Format(time.RFC3339), end.Sub(start))
	// Output:
	// 2027-03-28T00:00:00+01:00 23h0m0s
	// 2026-12-01T00:00:00Z 744h0m0s
}

// A key belongs to a customer with a plan of its own: a charge must fit
// both, and is recorded in both, or in neither. The decision names the
// limit that binds, the customer's once its budget is the tighter. On
// Redis Cluster the keys' identities are built with Member, so a key and
// its customer share a slot.
func ExampleMember() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	customer, _ := quota.NewPlan("business", quota.Limit{Name: "customer.minute", Max: 90, Window: time.Minute})
	key, _ := quota.NewPlan("key", quota.PerMinute(60))
	key.Shared = []quota.Shared{{Identity: "customer:7", Plan: customer}}

	fmt.Println(quota.Member("customer:7", "key:1"))
	for _, k := range []string{"key:1", "key:2", "key:3"} {
		d, _ := store.Charge(ctx, quota.Member("customer:7", k), key, 40)
		b := d.BindingLimit()
		fmt.Printf("%s: allowed=%v binding=%s remaining=%d\n", k, d.Allowed, b.Limit.Name, b.Remaining)
	}
	u, _ := store.Peek(ctx, "customer:7", customer)
	fmt.Println("customer:7 used", u.Limits[0].Used)
	// Output:
	// {customer:7}key:1
	// key:1: allowed=true binding=minute remaining=20
	// key:2: allowed=true binding=customer.minute remaining=10
	// key:3: allowed=false binding=customer.minute remaining=10
	// customer:7 used 80
}
