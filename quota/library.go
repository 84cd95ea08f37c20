package quota

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts that read a log (charge, settle, overdraft) are the functions
// of one Lua library, loaded into Redis once (FUNCTION LOAD) and called by
// name (FCALL). Redis runs the whole text of a script sent by EVALSHA on
// every call, so layout.lua's constants and log.lua's functions would be
// made anew each time: some 14,000 of Redis's instructions a decision,
// an eighth of it (cmd/scriptcost). A library's text runs once, when it is
// loaded, and a call runs only its function.
//
// The library's name holds a digest of its text, so servers of different
// versions, as in a rolling deploy, each call their own functions. Redis
// keeps a library through restarts as it keeps the data (RDB, AOF) and
// replicates it; a server that lacks it (flushed, a new cluster node)
// answers the first call that it is missing, and the store loads it and
// calls again.
//
// A server without functions (Redis before 7.0, a proxy that does not pass
// FCALL on, a user the ACLs deny FUNCTION) runs the same functions as
// scripts, by EVALSHA: the first call that finds so turns the store to
// scripts for good.

// A libScript is one function of the library, and the same as a script.
type libScript struct {
	name string        // its local name in the library's text: charge
	fn   string        // its name in Redis: tileapi_<digest>_charge
	body string        // its Lua: the body of a function of KEYS and ARGV
	eval *redis.Script // the library's text run as a script that calls it
}

var (
	chargeFn    = &libScript{name: "charge", body: chargeLua}
	settleFn    = &libScript{name: "settle", body: settleLua}
	overdraftFn = &libScript{name: "overdraft",
		// charge.lua inside overdraft.lua, which marks the charge's id.
		body: strings.Replace(overdraftLua, "\n-- charge.lua\n", "\n"+chargeLua+"\n", 1)}

	// library is the text FUNCTION LOAD is given.
	library = buildLibrary(chargeFn, settleFn, overdraftFn)
)

// buildLibrary returns the text of the library of fns, and names each
// function and builds its script.
func buildLibrary(fns ...*libScript) string {
	var defs strings.Builder
	for _, f := range fns {
		defs.WriteString(define(f))
	}
	sum := sha1.Sum([]byte(layoutLua + logLua + defs.String()))
	lib := "tileapi_" + hex.EncodeToString(sum[:6])
	var b strings.Builder
	b.WriteString("#!lua name=" + lib + "\n" + layoutLua + logLua + defs.String())
	for _, f := range fns {
		f.fn = lib + "_" + f.name
		b.WriteString("redis.register_function('" + f.fn + "', " + f.name + ")\n")
		f.eval = redis.NewScript(layoutLua + logLua + define(f) + "return " + f.name + "(KEYS, ARGV)\n")
	}
	return b.String()
}

// define returns the Lua that defines f as a local function. The names of
// log.lua for Redis's own functions are set as it starts: Redis lets a
// library's text read neither redis.call nor struct while it loads.
func define(f *libScript) string {
	return "local function " + f.name + "(KEYS, ARGV)\n" +
		"call, unpack_, pack = redis.call, struct.unpack, struct.pack\n" +
		f.body + "\nend\n"
}

// runScript calls f with FCALL, loading the library where Redis lacks it,
// or by EVALSHA on a server without functions.
func (r *Redis) runScript(ctx context.Context, f *libScript, keys []string, args ...any) *redis.Cmd {
	for tries := 0; ; tries++ {
		if r.scriptsOnly.Load() {
			return f.eval.Run(ctx, r.client, keys, args...)
		}
		cmd := r.client.FCall(ctx, f.fn, keys, args...)
		if tries > 0 || !r.recoverFunctions(ctx, cmd.Err()) {
			return cmd
		}
	}
}

// queueScript adds a call of f to pipe, by FCALL or on a server without
// functions EVALSHA. A pipeline does not load what Redis lacks: should
// the call fail so (missingScript), run it again alone with runScript.
func (r *Redis) queueScript(ctx context.Context, pipe redis.Pipeliner, f *libScript, keys []string, args ...any) *redis.Cmd {
	if r.scriptsOnly.Load() {
		return f.eval.EvalSha(ctx, pipe, keys, args...)
	}
	return pipe.FCall(ctx, f.fn, keys, args...)
}

// missingScript reports whether a call queued by queueScript failed
// because Redis lacked the library or the script, or has no functions:
// runScript, run then, loads what is missing or turns to scripts.
func missingScript(err error) bool {
	return redis.HasErrorPrefix(err, "NOSCRIPT") || functionMissing(err) || functionsUnsupported(err)
}

// recoverFunctions is what runScript does after an FCALL failed with err:
// it loads the library if Redis lacks it, or turns the store to scripts
// if Redis has no functions. It reports whether the call should be made
// again.
func (r *Redis) recoverFunctions(ctx context.Context, err error) bool {
	switch {
	case err == nil:
		return false
	case functionsUnsupported(err):
		r.scriptsOnly.Store(true)
		return true
	case !functionMissing(err):
		return false
	}
	if err := r.loadLibrary(ctx); err != nil {
		if functionsUnsupported(err) {
			r.scriptsOnly.Store(true)
			return true
		}
		return false // the call's own error is the one to report
	}
	return true
}

// loadLibrary loads the library into every primary that may hold keys: on
// a cluster, each master (a failover's new master has it already, by
// replication; a new node gets it at its first call).
func (r *Redis) loadLibrary(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, library).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil // another process loaded it first
		}
		return err
	}
	switch c := r.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return load(ctx, n) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return load(ctx, n) })
	case redis.Cmdable:
		return load(ctx, c)
	}
	return errors.ErrUnsupported
}

// functionMissing reports whether err is Redis saying it has no function
// of that name: the library was never loaded on that server, or was lost.
// (HasErrorPrefix reads Redis's messages without their "ERR ".)
func functionMissing(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found")
}

// functionsUnsupported reports whether err is Redis, or a proxy before
// it, refusing FCALL or FUNCTION LOAD outright: an unknown command, or one
// this user may not run.
func functionsUnsupported(err error) bool {
	return errors.Is(err, errors.ErrUnsupported) ||
		redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "NOPERM")
}
