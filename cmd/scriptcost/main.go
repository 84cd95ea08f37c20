// Command scriptcost counts the instructions Redis executes per quota
// decision, for quota's charge script (one and two limits; one limit with
// an in-flight slot taken in the script and given back, or in three round
// trips; and a plan as tileapi sells them, two windows and a month with a
// slot) and for
// go-redis/redis_rate's AllowN, by running redis-server under Valgrind's
// callgrind. Unlike a timed benchmark the counts barely move from run to
// run, so they show what a change to charge.lua costs Redis.
//
//	go run ./cmd/scriptcost [-redis-server redis-server] [-n 3000]
//
// It needs valgrind (apt-get install valgrind) and starts its own
// redis-server on a free loopback port. Under callgrind a decision takes
// about a millisecond, so the defaults (100 identities, a 2 s window) keep
// each log in the steady state of the benchmark: about one charge in and
// one out a call. Each implementation first runs n decisions to reach it,
// then n more are counted, and the commands Redis ran for them (INFO
// commandstats) are printed, a decision's share of each. To see where the
// instructions go, build redis-server with symbols (make in a checkout of
// its tag), give it with -redis-server, keep the dumps (-keep DIR; dump k
// is implementation k, from 1) and read them with callgrind_annotate
// --inclusive=yes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

// limit is the units a second of every plan: never reached, and large
// enough that redis_rate records each decision (see internal/enginebench).
const limit = 1_000_000

// prefix starts the quota keys of the run.
const prefix = "scriptcost:"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scriptcost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("redis-server", "redis-server", "the redis-server binary to run under callgrind")
	n := fs.Int("n", 3000, "decisions counted per implementation (as many again warm up)")
	ids := fs.Int("ids", 100, "identities the decisions cycle over")
	window := fs.Duration("window", 2*time.Second, "the window of the plans (the burst limit of two is a tenth of it)")
	keep := fs.String("keep", "", "a directory to keep the callgrind dumps in (default: a temporary one, removed)")
	breakdown := fs.Bool("breakdown", false, "also count, on the same logs, scripts that each do one step more of what a decision does, and report what each step adds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *ids < 1 || *window < 10*time.Millisecond {
		return errors.New("-n and -ids must be at least 1, -window at least 10ms")
	}
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: apt-get install valgrind", tool)
		}
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "scriptcost")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	rs, err := startRedis(ctx, *server, dir, stderr)
	if err != nil {
		return err
	}
	defer rs.stop()

	one, err := quota.NewPlan("one", quota.Limit{Name: "window", Max: limit, Window: *window})
	if err != nil {
		return err
	}
	two, err := quota.NewPlan("two",
		quota.Limit{Name: "burst", Max: limit, Window: *window / 10},
		quota.Limit{Name: "window", Max: limit, Window: *window})
	if err != nil {
		return err
	}
	// A plan as tileapi sells them: a burst window, a window, a month.
	sold, err := quota.NewPlan("sold",
		quota.Limit{Name: "burst", Max: limit, Window: *window / 10},
		quota.Limit{Name: "window", Max: limit, Window: *window},
		quota.PerMonth(1<<40))
	if err != nil {
		return err
	}
	store := quota.NewRedis(rs.client, quota.WithPrefix(prefix))
	rate := redis_rate.NewLimiter(rs.client)
	slots := inflight.NewRedis(rs.client, inflight.WithPrefix(prefix+"f:"))
	impls := []struct {
		name   string
		decide func(ctx context.Context, id string) error
	}{
		{"redis_rate", func(ctx context.Context, id string) error {
			_, err := rate.AllowN(ctx, "scriptcost:"+id, redis_rate.PerSecond(limit), 1)
			return err
		}},
		{"tileapi", func(ctx context.Context, id string) error {
			_, err := store.Charge(ctx, id, one, 1)
			return err
		}},
		{"tileapi-2limits", func(ctx context.Context, id string) error {
			_, err := store.Charge(ctx, "2:"+id, two, 1)
			return err
		}},
		// A request with an in-flight limit: its slot taken in the charge's
		// script, then given back (Held.Release sends the same ZREM in the
		// background).
		{"tileapi-inflight", func(ctx context.Context, id string) error {
			h := slots.Hold(store, "f:"+id, 8)
			if _, err := h.Charge(ctx, "f:"+id, one, 1); err != nil {
				return err
			}
			return slots.Release(ctx, h.Lease())
		}},
		// A request on a plan as tileapi sells them (two windows and a
		// month), with its in-flight slot: the compiled-in plans' path.
		{"tileapi-sold", func(ctx context.Context, id string) error {
			h := slots.Hold(store, "s:"+id, 8)
			if _, err := h.Charge(ctx, "s:"+id, sold, 1); err != nil {
				return err
			}
			return slots.Release(ctx, h.Lease())
		}},
		// The same in three round trips: what a Held falls back to over a
		// store that takes no slot in its script.
		{"inflight-3trips", func(ctx context.Context, id string) error {
			l, _, err := slots.Acquire(ctx, "g:"+id, 8)
			if err != nil {
				return err
			}
			if _, err := store.Charge(ctx, "g:"+id, one, 1); err != nil {
				return err
			}
			return slots.Release(ctx, l)
		}},
	}

	perDecision := make([]float64, len(impls))
	commands := make([]map[string]float64, len(impls))
	for i, impl := range impls {
		fmt.Fprintf(stderr, "%s: %d decisions to warm up, %d counted\n", impl.name, *n, *n)
		loop := func() error {
			for j := range *n {
				if err := impl.decide(ctx, "id-"+strconv.Itoa(j%*ids)); err != nil {
					return fmt.Errorf("%s: %w", impl.name, err)
				}
			}
			return nil
		}
		if err := loop(); err != nil {
			return err
		}
		if err := rs.control("-z"); err != nil {
			return err
		}
		if err := rs.client.ConfigResetStat(ctx).Err(); err != nil {
			return err
		}
		start := time.Now()
		if err := loop(); err != nil {
			return err
		}
		total, err := rs.dump()
		if err != nil {
			return err
		}
		perDecision[i] = float64(total) / float64(*n)
		cmds, err := commandsPerCall(ctx, rs.client, *n)
		if err != nil {
			return err
		}
		commands[i] = cmds
		fmt.Fprintf(stderr, "%s: %v a decision, Redis commands a decision: %s\n", impl.name, time.Since(start)/time.Duration(*n), commandList(cmds))
	}

	fmt.Fprintf(stdout, "%-16s %14s %8s\n", "implementation", "instr/decision", "ratio")
	for i, impl := range impls {
		fmt.Fprintf(stdout, "%-16s %14.0f %8.2f\n", impl.name, perDecision[i], perDecision[i]/perDecision[0])
	}
	fmt.Fprintf(stdout, "(redis-server under callgrind, %d decisions each after as many to warm up, %d identities, %s window; ratio to redis_rate)\n",
		*n, *ids, *window)
	if !*breakdown {
		return nil
	}
	return breakDown(ctx, rs, store, *n, *ids, map[string]float64{"redis_rate": perDecision[0], "tileapi": perDecision[1]}, commands[1], stdout)
}

// pexpireStep is the name of the step that adds tileapi's PEXPIRE.
const pexpireStep = "+ PEXPIRE"

// A step of a breakdown: a script that does one thing more than the step
// before it, run with the keys and arguments of a decision.
type step struct{ name, lua string }

// stepsPrelude starts the library of tileapi's steps: the offset's text
// kept across calls, as log.lua's text keeps it, so that the SETRANGE step
// counts the command and not Redis formatting a number.
const stepsPrelude = `local texts = {}
local function text(n)
  local s = texts[n]
  if not s then s = string.format('%d', n) texts[n] = s end
  return s
end
`

// The steps of a decision, each script doing what the one before it did
// and one command more, with arguments of the same sizes as the real
// scripts' (tileapi: a log key, the call's 32 bytes of packed numbers and
// the plan's 120; redis_rate: its key and four numbers as text).
var (
	tileapiSteps = []step{
		{"FCALL of an empty function, with the arguments", `return ''`},
		{"+ TIME", `local t = redis.call('TIME') return ''`},
		{"+ GETRANGE of the log's end", `local t = redis.call('TIME')
local raw = redis.call('GETRANGE', KEYS[1], '-4096', '-1') return ''`},
		{"+ SETRANGE of a record and the header at the tail", `local t = redis.call('TIME')
local raw = redis.call('GETRANGE', KEYS[1], '-4096', '-1')
redis.call('SETRANGE', KEYS[1], text(#raw - 96), string.rep('x', 102)) return ''`},
		{pexpireStep, `local t = redis.call('TIME')
local raw = redis.call('GETRANGE', KEYS[1], '-4096', '-1')
redis.call('SETRANGE', KEYS[1], text(#raw - 96), string.rep('x', 102))
redis.call('PEXPIRE', KEYS[1], '2500') return ''`},
	}
	rateSteps = []step{
		{"EVALSHA of an empty script, with the arguments", `return ''`},
		{"+ TIME", `local t = redis.call('TIME') return ''`},
		{"+ GET", `local t = redis.call('TIME')
local tat = redis.call('GET', KEYS[1]) return ''`},
		{"+ SET EX", `local t = redis.call('TIME')
local tat = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], (tonumber(tat) or 0) + 0.000001, 'EX', 3600) return ''`},
	}
)

// breakDown counts the steps for both implementations on logs and keys like
// those of the decisions (written anew, with an hour to live, as the steps
// take longer than a window under callgrind), and prints what each adds;
// what the last leaves of a decision's total is the script's own Lua.
//
// A decision of tileapi sets its log's TTL only now and then (a quarter
// window at a time): the PEXPIRE step counts at the share of decisions that
// made one (pexpires, from the decisions' own run), so what is left is the
// Lua's.
func breakDown(ctx context.Context, rs *redisUnderCallgrind, store *quota.Redis, n, ids int, totals map[string]float64, tileapiCommands map[string]float64, stdout io.Writer) error {
	hour, err := quota.NewPlan("hour", quota.Limit{Name: "hour", Max: limit, Window: time.Hour})
	if err != nil {
		return err
	}
	for j := range ids {
		id := "id-" + strconv.Itoa(j)
		for range 20 { // about the records a log of the decisions holds
			if _, err := store.Charge(ctx, id, hour, 1); err != nil {
				return err
			}
		}
		if err := rs.client.Set(ctx, "rate:scriptcost:"+id, "1", time.Hour).Err(); err != nil {
			return err
		}
	}
	for _, impl := range []struct {
		name      string
		steps     []step
		functions bool // the steps are functions (FCALL), not scripts
		call      func(id string) ([]string, []any)
	}{
		{"tileapi", tileapiSteps, true, func(id string) ([]string, []any) {
			return []string{store.LogKey(id)}, []any{strings.Repeat("\x00", 8*4), strings.Repeat("\x00", 8*15)}
		}},
		{"redis_rate", rateSteps, false, func(id string) ([]string, []any) {
			return []string{"rate:scriptcost:" + id}, []any{limit, limit, 1, 1}
		}},
	} {
		fmt.Fprintf(stdout, "\n%s, a decision broken down:\n%-52s %14s\n", impl.name, "step", "instructions")
		// tileapi's scripts are the functions of a library (FCALL), redis_rate's
		// scripts (EVALSHA): each step is called as its implementation calls.
		if impl.functions {
			lib := "#!lua name=scriptcost_steps\n" + stepsPrelude
			for i, st := range impl.steps {
				lib += fmt.Sprintf("redis.register_function('step%d', function(KEYS, ARGV)\n%s\nend)\n", i, st.lua)
			}
			if err := rs.client.FunctionLoadReplace(ctx, lib).Err(); err != nil {
				return fmt.Errorf("load the steps: %w", err)
			}
		}
		var before, accounted float64
		for i, st := range impl.steps {
			script := redis.NewScript(st.lua)
			run := func(keys []string, args []any) *redis.Cmd {
				if impl.functions {
					return rs.client.FCall(ctx, "step"+strconv.Itoa(i), keys, args...)
				}
				return script.Run(ctx, rs.client, keys, args...)
			}
			if err := rs.control("-z"); err != nil {
				return err
			}
			for j := range n {
				keys, args := impl.call("id-" + strconv.Itoa(j%ids))
				if err := run(keys, args).Err(); err != nil && !errors.Is(err, redis.Nil) {
					return fmt.Errorf("%s: %s: %w", impl.name, st.name, err)
				}
			}
			total, err := rs.dump()
			if err != nil {
				return err
			}
			per := float64(total) / float64(n)
			cost := per - before
			before = per
			if st.name == pexpireStep && impl.functions {
				share := tileapiCommands["pexpire"]
				fmt.Fprintf(stdout, "%-52s %14.0f  (%.0f each, in %.2f of the decisions)\n", st.name, cost*share, cost, share)
				accounted += cost * share
				continue
			}
			fmt.Fprintf(stdout, "%-52s %14.0f\n", st.name, cost)
			accounted += cost
		}
		fmt.Fprintf(stdout, "%-52s %14.0f\n", "the script's own Lua (the rest of a decision)", totals[impl.name]-accounted)
	}
	return nil
}

// redisUnderCallgrind is a redis-server run by valgrind --tool=callgrind.
type redisUnderCallgrind struct {
	cmd    *exec.Cmd
	dir    string
	client *redis.Client
	dumps  int
}

func startRedis(ctx context.Context, server, dir string, stderr io.Writer) (*redisUnderCallgrind, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// Names written out in each dump, not numbered once for the run:
	// callgrind_annotate reads a dump after the first (-keep) only so.
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=callgrind", "--compress-strings=no",
		"--callgrind-out-file="+filepath.Join(dir, "callgrind.out.%p"),
		server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start valgrind %s: %w", server, err)
	}
	rs := &redisUnderCallgrind{cmd: cmd, dir: dir,
		client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), ReadTimeout: 30 * time.Second, MaxRetries: -1})}
	fmt.Fprintf(stderr, "redis-server under callgrind on 127.0.0.1:%d (pid %d)\n", port, cmd.Process.Pid)
	deadline := time.Now().Add(2 * time.Minute)
	for rs.client.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			rs.stop()
			return nil, errors.New("redis-server under callgrind did not answer PING within 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return rs, nil
}

func (rs *redisUnderCallgrind) control(flag string) error {
	out, err := exec.Command("callgrind_control", flag, strconv.Itoa(rs.cmd.Process.Pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %s: %v: %s", flag, err, out)
	}
	return nil
}

// dump writes the counts since the last zeroing to a new file and returns
// their total.
func (rs *redisUnderCallgrind) dump() (int64, error) {
	if err := rs.control("-d"); err != nil {
		return 0, err
	}
	rs.dumps++
	// callgrind names the dumps <file>.<pid>.<k>, k counting from 1.
	name := filepath.Join(rs.dir, fmt.Sprintf("callgrind.out.%d.%d", rs.cmd.Process.Pid, rs.dumps))
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, fmt.Errorf("read the dump: %w (dumps there: %v)", err, rs.files())
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no summary line", name)
}

func (rs *redisUnderCallgrind) files() []string {
	m, _ := filepath.Glob(filepath.Join(rs.dir, "callgrind.out.*"))
	sort.Strings(m)
	return m
}

func (rs *redisUnderCallgrind) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs.client.Shutdown(ctx) // answers with an error as the connection closes
	rs.client.Close()
	done := make(chan struct{})
	go func() { rs.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		rs.cmd.Process.Kill()
		<-done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// commandsPerCall returns the commands Redis ran since its stats were
// reset, each one's calls over n.
func commandsPerCall(ctx context.Context, c *redis.Client, n int) (map[string]float64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		k, err := strconv.Atoi(calls)
		if err != nil || strings.HasSuffix(name, "config|resetstat") {
			continue
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = float64(k) / float64(n)
	}
	return out, nil
}

// commandList is "fcall 1.00, getrange 1.00, ...", in name order.
func commandList(calls map[string]float64) string {
	out := make([]string, 0, len(calls))
	for name, v := range calls {
		out = append(out, fmt.Sprintf("%s %.2f", name, v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
