package pglayers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pgq"
	"github.com/tileapi/tileapi/tiles"
)

// signature is the argument list of a function layer's function.
const signature = "(integer, integer, integer, jsonb)"

// function is a function as the catalog describes it to the current role.
type function struct {
	Schema   string
	Name     string
	Returns  string // the return type, as format_type spells it
	Set      bool   // returns a set
	Kind     string // pg_proc.prokind: f for a function
	Comment  string
	Role     string
	Callable bool // the role may EXECUTE it
}

// functionSQL finds function $1 of the layer signature.
const functionSQL = `
SELECT n.nspname AS schema, p.proname AS name, format_type(p.prorettype, NULL) AS returns,
       p.proretset AS set, p.prokind::text AS kind,
       coalesce(obj_description(p.oid, 'pg_proc'), '') AS comment,
       current_user::text AS role, has_function_privilege(p.oid, 'EXECUTE') AS callable
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.oid = to_regprocedure($1 || '` + signature + `')`

// overloadsSQL lists the functions called $1 (a name as PostgreSQL reads
// one), with their arguments and return types: what a layer might have
// meant.
const overloadsSQL = `
SELECT p.oid::regprocedure::text || ' returns ' || format_type(p.prorettype, NULL)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
     parse_ident($1) AS i
WHERE p.proname = i[array_upper(i, 1)]
  AND (array_length(i, 1) = 1 AND n.nspname = ANY (current_schemas(true)) OR n.nspname = i[array_upper(i, 1) - 1])
ORDER BY 1`

// callSQL draws a tile of a function layer; {function} is its quoted name.
const callSQL = `SELECT {function}($1::integer, $2::integer, $3::integer, $4::jsonb)`

// openFunction opens the function layer cfg.
func openFunction(ctx context.Context, db pgq.Store, cfg layers.Layer) (tiles.Layer, error) {
	name := cfg.Function
	fs, err := pgq.Query(ctx, db, pgq.AutoPlan, functionSQL, []any{name}, pgq.Structs[function])
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return tiles.Layer{}, fmt.Errorf("function %q: no privilege: %s (GRANT USAGE ON SCHEMA ... TO the role)", name, pgErr.Message)
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "42"): // a name that is not one
		return tiles.Layer{}, fmt.Errorf("function %q: no such function%s: %s", name, signature, pgErr.Message)
	case err != nil:
		return tiles.Layer{}, fmt.Errorf("function %q: %w", name, err)
	case len(fs) == 0:
		return tiles.Layer{}, noFunction(ctx, db, name)
	}
	f := fs[0]
	qualified := quoteName(f.Schema) + "." + quoteName(f.Name) + signature
	switch {
	case f.Kind != "f":
		return tiles.Layer{}, fmt.Errorf("function %q: %s is a procedure or aggregate, not a function", name, qualified)
	case f.Returns != "bytea" || f.Set:
		returns := f.Returns
		if f.Set {
			returns = "setof " + returns
		}
		return tiles.Layer{}, fmt.Errorf("function %q: %s returns %s: a function layer's returns bytea, one MVT", name, qualified, returns)
	case !f.Callable:
		return tiles.Layer{}, fmt.Errorf("function %q: no privilege: the role %q may not EXECUTE %s (GRANT EXECUTE ON FUNCTION %s TO %s)",
			name, f.Role, qualified, qualified, pgx.Identifier{f.Role}.Sanitize())
	}
	l := common(cfg, f.Comment)
	l.Params = cfg.Params
	l.Source = &functionSource{
		db: db, name: cfg.Name,
		sql: strings.ReplaceAll(callSQL, "{function}", pgx.Identifier{f.Schema, f.Name}.Sanitize()),
	}
	return l, nil
}

// noFunction is the error for a function name with no function of the
// layer signature, listing those of that name there are.
func noFunction(ctx context.Context, db pgq.Store, name string) error {
	err := fmt.Errorf("function %q: no such function%s returning bytea", name, signature)
	others, qerr := pgq.Query(ctx, db, pgq.AutoPlan, overloadsSQL, []any{name}, func(rows pgx.Rows) ([]string, error) {
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
	if qerr != nil || len(others) == 0 {
		return err
	}
	return fmt.Errorf("%w; there is %s: declare it as (z integer, x integer, y integer, params jsonb) returns bytea",
		err, strings.Join(others, ", "))
}

// functionSource draws the tiles of a function layer.
type functionSource struct {
	db   pgq.Store
	name string
	sql  string
}

var _ tiles.Source = (*functionSource)(nil)

// Tile calls the function for tile t with params; a NULL is an empty tile.
func (s *functionSource) Tile(ctx context.Context, t maptile.Tile, params tiles.Params) ([]byte, error) {
	args := []any{int(t.Z), int(t.X), int(t.Y), string(params.JSON())}
	b, err := pgq.Query(ctx, s.db, pgq.AutoPlan, s.sql, args, func(rows pgx.Rows) ([]byte, error) {
		return pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
	})
	if err != nil {
		return nil, fmt.Errorf("pglayers: %s %d/%d/%d: %w", s.name, t.Z, t.X, t.Y, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}
