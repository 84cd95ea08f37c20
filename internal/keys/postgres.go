package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/pgq"
)

// Postgres keeps keys in the api_keys table (migrations/00003_api_keys.sql)
// as their hash and visible prefix, never their secret, and customers in
// the customers table (migrations/00010_customers.sql).
type Postgres struct {
	pool *pgxpool.Pool
}

// NewPostgres returns a Postgres on pool, whose database has the
// migrations applied.
func NewPostgres(pool *pgxpool.Pool) *Postgres {
	return &Postgres{pool: pool}
}

// The columns every query returns, as a row.
const keyColumns = `id, prefix, name, plan, created_at, revoked_at, updated_at, overrides, restrictions, expires_at, previous_valid_until, customer_id`

const (
	// addSQL inserts a key, or on a secret already registered returns that
	// key: the no-op update makes RETURNING yield the existing row, also
	// when a concurrent Add of the same secret commits first.
	addSQL = `INSERT INTO api_keys (hash, prefix, name, plan, customer_id) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (hash) DO UPDATE SET hash = api_keys.hash
RETURNING ` + keyColumns
	// lookupSQL finds a key by its secret or its secret before its last
	// reroll; a hash that is both (a hand-picked secret registered again
	// after a reroll) stands for the key it is current for.
	lookupSQL = `SELECT hash, previous_hash, ` + keyColumns + ` FROM api_keys WHERE hash = $1 OR previous_hash = $1
ORDER BY hash = $1 DESC LIMIT 1`
	listSQL = `SELECT ` + keyColumns + ` FROM api_keys ORDER BY id`
	// changedSQL reads what Index.Refresh needs, through the index on
	// updated_at.
	changedSQL = `SELECT hash, previous_hash, ` + keyColumns + ` FROM api_keys WHERE updated_at > $1 ORDER BY updated_at`
	getSQL     = `SELECT ` + keyColumns + ` FROM api_keys WHERE id = $1`
	// revokeSQL keeps the first revocation time of a revoked key.
	revokeSQL  = `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()), updated_at = now() WHERE id = $1 RETURNING ` + keyColumns
	setPlanSQL = `UPDATE api_keys SET plan = $2, updated_at = now() WHERE id = $1 RETURNING ` + keyColumns
	// setOverridesSQL stores overrides given as JSON text, or NULL.
	setOverridesSQL = `UPDATE api_keys SET overrides = $2::jsonb, updated_at = now() WHERE id = $1 RETURNING ` + keyColumns
	// setRestrictionsSQL stores restrictions given as JSON text, or NULL.
	setRestrictionsSQL = `UPDATE api_keys SET restrictions = $2::jsonb, updated_at = now() WHERE id = $1 RETURNING ` + keyColumns
	// setExpirySQL stores when the key stops working, or NULL for never.
	setExpirySQL = `UPDATE api_keys SET expires_at = $2, updated_at = now() WHERE id = $1 RETURNING ` + keyColumns
	// rerollSQL moves the key's hash to previous_hash, valid for $6
	// microseconds more, and gives it a new secret of its own kind: $2 and
	// $3 are the hash and prefix of a new publishable secret, $4 and $5 of
	// a new secret one, so that one statement decides by the stored
	// prefix. The prefix comes back, and says which secret it took.
	rerollSQL = `UPDATE api_keys SET previous_hash = hash,
	previous_valid_until = now() + $6 * interval '1 microsecond',
	hash = CASE WHEN starts_with(prefix, 'tk_pub_') THEN $2::bytea ELSE $4::bytea END,
	prefix = CASE WHEN starts_with(prefix, 'tk_pub_') THEN $3::text ELSE $5::text END,
	updated_at = now()
WHERE id = $1 RETURNING ` + keyColumns
	// setCustomerSQL moves a key to customer $2, or out of any for NULL;
	// a customer that does not exist fails the foreign key.
	setCustomerSQL = `UPDATE api_keys SET customer_id = $2, updated_at = now() WHERE id = $1 RETURNING ` + keyColumns
)

// row is a key as the queries return it.
type row struct {
	ID           int64
	Prefix       string
	Name         string
	Plan         string
	CreatedAt    time.Time
	RevokedAt    *time.Time // NULL while active
	UpdatedAt    time.Time
	Overrides    []byte     // jsonb, NULL for none
	Restrictions []byte     // jsonb, NULL for none
	ExpiresAt    *time.Time // NULL for never
	// PreviousValidUntil is NULL for a key never rerolled.
	PreviousValidUntil *time.Time
	CustomerID         *int64 // NULL for none
}

func (r row) key() Key {
	k := Key{ID: r.ID, Prefix: r.Prefix, Name: r.Name, Plan: r.Plan, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Overrides: r.Overrides}
	if r.RevokedAt != nil {
		k.RevokedAt = r.RevokedAt.UTC()
	}
	k.Restrictions = r.Restrictions
	if r.ExpiresAt != nil {
		k.ExpiresAt = r.ExpiresAt.UTC()
	}
	if r.PreviousValidUntil != nil {
		k.PreviousValidUntil = r.PreviousValidUntil.UTC()
	}
	if r.CustomerID != nil {
		k.CustomerID = *r.CustomerID
	}
	return k
}

// Create makes a secret key with a new secret and returns it with the
// secret, which is not stored and cannot be shown again.
func (p *Postgres) Create(ctx context.Context, name, plan string) (Key, string, error) {
	return p.CreateKind(ctx, Secret, name, plan, 0)
}

// CreateKind makes a key of kind k with a new secret, of the customer
// customerID (0 for none), and returns it with the secret, which is not
// stored and cannot be shown again. It returns ErrCustomerNotFound if
// there is no such customer.
func (p *Postgres) CreateKind(ctx context.Context, kind Kind, name, plan string, customerID int64) (Key, string, error) {
	secret, err := Generate(kind)
	if err != nil {
		return Key{}, "", err
	}
	// Two generated secrets never collide (256 random bits), so add always
	// inserts here.
	k, err := p.add(ctx, name, plan, secret, customerID)
	return k, secret, err
}

// Add registers a key with the given secret, such as a demo key. If the
// secret is already registered it returns that key unchanged, whatever
// name and plan it is given.
func (p *Postgres) Add(ctx context.Context, name, plan, secret string) (Key, error) {
	return p.add(ctx, name, plan, secret, 0)
}

func (p *Postgres) add(ctx context.Context, name, plan, secret string, customerID int64) (Key, error) {
	k, err := p.one(ctx, addSQL, Hash(secret), PrefixOf(secret), name, plan, nullID(customerID))
	if err != nil {
		return Key{}, fmt.Errorf("keys: add: %w", customerFailure(customerID, storeFailure(err)))
	}
	return k, nil
}

// Lookup returns the key whose secret, or secret before its last reroll,
// has the given hash, revoked or not, or ErrUnknown.
func (p *Postgres) Lookup(ctx context.Context, hash []byte) (Key, error) {
	e, err := p.LookupEntry(ctx, hash)
	return e.Key, err
}

// LookupEntry is Lookup with the key's hashes: whether hash is the key's
// current secret or its previous one.
func (p *Postgres) LookupEntry(ctx context.Context, hash []byte) (Entry, error) {
	rows, _ := p.pool.Query(ctx, lookupSQL, hash)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[hashedRow])
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, ErrUnknown
	}
	if err != nil {
		return Entry{}, fmt.Errorf("keys: lookup: %w", storeFailure(err))
	}
	return r.entry(), nil
}

// Changed returns every key, with its hash, whose UpdatedAt is after since,
// oldest change first: what an Index reads to keep fresh.
func (p *Postgres) Changed(ctx context.Context, since time.Time) ([]Entry, error) {
	rows, _ := p.pool.Query(ctx, changedSQL, since)
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[hashedRow])
	if err != nil {
		return nil, fmt.Errorf("keys: changed: %w", storeFailure(err))
	}
	es := make([]Entry, len(rs))
	for i, r := range rs {
		es[i] = r.entry()
	}
	return es, nil
}

// hashedRow is a row with the hashes of its secrets.
type hashedRow struct {
	Hash         []byte
	PreviousHash []byte // NULL for none
	row
}

func (r hashedRow) entry() Entry {
	return Entry{Hash: r.Hash, Previous: r.PreviousHash, Key: r.key()}
}

// List returns every key, revoked ones too, by id.
func (p *Postgres) List(ctx context.Context) ([]Key, error) {
	rows, _ := p.pool.Query(ctx, listSQL)
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return nil, fmt.Errorf("keys: list: %w", storeFailure(err))
	}
	ks := make([]Key, len(rs))
	for i, r := range rs {
		ks[i] = r.key()
	}
	return ks, nil
}

// Get returns the key with the given id, or ErrNotFound.
func (p *Postgres) Get(ctx context.Context, id int64) (Key, error) {
	return p.byID(ctx, "get", getSQL, id)
}

// Revoke revokes the key with the given id and returns it; revoking a
// revoked key keeps its first revocation time. It returns ErrNotFound if
// there is no such key.
func (p *Postgres) Revoke(ctx context.Context, id int64) (Key, error) {
	return p.byID(ctx, "revoke", revokeSQL, id)
}

// SetPlan moves the key with the given id to plan and returns it, or
// ErrNotFound.
func (p *Postgres) SetPlan(ctx context.Context, id int64, plan string) (Key, error) {
	return p.byID(ctx, "set plan", setPlanSQL, id, plan)
}

// SetOverrides stores the key's overrides (JSON; nil clears them) and
// returns the key, or ErrNotFound. The caller validates them.
func (p *Postgres) SetOverrides(ctx context.Context, id int64, overrides []byte) (Key, error) {
	var arg any // NULL for none
	if overrides != nil {
		arg = string(overrides)
	}
	return p.byID(ctx, "set overrides", setOverridesSQL, id, arg)
}

// SetRestrictions stores the key's restrictions (JSON; nil clears them)
// and returns the key, or ErrNotFound. The caller validates them.
func (p *Postgres) SetRestrictions(ctx context.Context, id int64, restrictions []byte) (Key, error) {
	var arg any // NULL for none
	if restrictions != nil {
		arg = string(restrictions)
	}
	return p.byID(ctx, "set restrictions", setRestrictionsSQL, id, arg)
}

// SetExpiry sets when the key stops working (the zero time: never) and
// returns the key, or ErrNotFound.
func (p *Postgres) SetExpiry(ctx context.Context, id int64, at time.Time) (Key, error) {
	var arg any // NULL for never
	if !at.IsZero() {
		arg = at
	}
	return p.byID(ctx, "set expiry", setExpirySQL, id, arg)
}

// Reroll gives the key with the given id a new secret of its kind and
// returns the key with it, shown this once: the secret it had works on
// for overlap (0: it stops at once), then is refused (ErrRotated), and a
// previous secret of an earlier reroll stops at once. Its id, plan,
// overrides, restrictions and usage stay. It returns ErrNotFound if there
// is no such key. One statement does it, so concurrent rerolls of a key
// each leave a working secret.
func (p *Postgres) Reroll(ctx context.Context, id int64, overlap time.Duration) (Key, string, error) {
	pub, err := Generate(Publishable)
	if err != nil {
		return Key{}, "", err
	}
	sec, err := Generate(Secret)
	if err != nil {
		return Key{}, "", err
	}
	k, err := p.byID(ctx, "reroll", rerollSQL, id, Hash(pub), PrefixOf(pub), Hash(sec), PrefixOf(sec), max(overlap, 0).Microseconds())
	if err != nil {
		return Key{}, "", err
	}
	if k.Prefix == PrefixOf(pub) {
		return k, pub, nil
	}
	return k, sec, nil
}

// SetCustomer moves the key with the given id to the customer customerID,
// or out of any for 0, and returns it; ErrNotFound if there is no such
// key, ErrCustomerNotFound if there is no such customer.
func (p *Postgres) SetCustomer(ctx context.Context, id, customerID int64) (Key, error) {
	k, err := p.byID(ctx, "set customer", setCustomerSQL, id, nullID(customerID))
	return k, customerFailure(customerID, err)
}

// nullID is id as a query argument: NULL for 0.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// customerFailure is err, the failure of a write that gave a key the
// customer customerID, as ErrCustomerNotFound where the customer does not
// exist (the foreign key refused it).
func customerFailure(customerID int64, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
		return fmt.Errorf("%w: id %d", ErrCustomerNotFound, customerID)
	}
	return err
}

// byID runs query, whose $1 is id, for the operation op and returns the key
// it yields, or ErrNotFound.
func (p *Postgres) byID(ctx context.Context, op, query string, id int64, args ...any) (Key, error) {
	k, err := p.one(ctx, query, append([]any{id}, args...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	if err != nil {
		return Key{}, fmt.Errorf("keys: %s %d: %w", op, id, storeFailure(err))
	}
	return k, nil
}

// one runs query and returns the one key it yields, or pgx.ErrNoRows.
func (p *Postgres) one(ctx context.Context, query string, args ...any) (Key, error) {
	rows, _ := p.pool.Query(ctx, query, args...)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[row])
	if err != nil {
		return Key{}, err
	}
	return r.key(), nil
}

// storeFailure marks err as ErrUnavailable where the database could not be
// reached or did not answer in time.
func storeFailure(err error) error {
	err = pgq.Classify(err)
	if errors.Is(err, pgq.ErrUnavailable) || errors.Is(err, pgq.ErrTimeout) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// The columns every customer query returns, as a row.
const customerColumns = `id, name, plan, created_at, updated_at`

const (
	createCustomerSQL = `INSERT INTO customers (name, plan) VALUES ($1, $2) RETURNING ` + customerColumns
	getCustomerSQL    = `SELECT ` + customerColumns + ` FROM customers WHERE id = $1`
	listCustomersSQL  = `SELECT ` + customerColumns + ` FROM customers ORDER BY id`
	// changedCustomersSQL reads what Index.Refresh needs, through the
	// index on updated_at.
	changedCustomersSQL = `SELECT ` + customerColumns + ` FROM customers WHERE updated_at > $1 ORDER BY updated_at`
	setCustomerPlanSQL  = `UPDATE customers SET plan = $2, updated_at = now() WHERE id = $1 RETURNING ` + customerColumns
	renameCustomerSQL   = `UPDATE customers SET name = $2, updated_at = now() WHERE id = $1 RETURNING ` + customerColumns
)

// CreateCustomer makes a customer on plan and returns it.
func (p *Postgres) CreateCustomer(ctx context.Context, name, plan string) (Customer, error) {
	rows, _ := p.pool.Query(ctx, createCustomerSQL, name, plan)
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Customer])
	if err != nil {
		return Customer{}, fmt.Errorf("keys: create customer: %w", storeFailure(err))
	}
	return c.utc(), nil
}

// GetCustomer returns the customer with the given id, or
// ErrCustomerNotFound.
func (p *Postgres) GetCustomer(ctx context.Context, id int64) (Customer, error) {
	return p.customerByID(ctx, "get customer", getCustomerSQL, id)
}

// ListCustomers returns every customer, by id.
func (p *Postgres) ListCustomers(ctx context.Context) ([]Customer, error) {
	return p.customers(ctx, "list customers", listCustomersSQL)
}

// ChangedCustomers returns every customer whose UpdatedAt is after since,
// oldest change first: what an Index reads to keep fresh.
func (p *Postgres) ChangedCustomers(ctx context.Context, since time.Time) ([]Customer, error) {
	return p.customers(ctx, "changed customers", changedCustomersSQL, since)
}

// SetCustomerPlan moves the customer with the given id to plan and returns
// it, or ErrCustomerNotFound.
func (p *Postgres) SetCustomerPlan(ctx context.Context, id int64, plan string) (Customer, error) {
	return p.customerByID(ctx, "set customer plan", setCustomerPlanSQL, id, plan)
}

// RenameCustomer gives the customer with the given id a new name and
// returns it, or ErrCustomerNotFound.
func (p *Postgres) RenameCustomer(ctx context.Context, id int64, name string) (Customer, error) {
	return p.customerByID(ctx, "rename customer", renameCustomerSQL, id, name)
}

// customerByID runs query, whose $1 is id, for the operation op and
// returns the customer it yields, or ErrCustomerNotFound.
func (p *Postgres) customerByID(ctx context.Context, op, query string, id int64, args ...any) (Customer, error) {
	rows, _ := p.pool.Query(ctx, query, append([]any{id}, args...)...)
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Customer])
	if errors.Is(err, pgx.ErrNoRows) {
		return Customer{}, fmt.Errorf("%w: id %d", ErrCustomerNotFound, id)
	}
	if err != nil {
		return Customer{}, fmt.Errorf("keys: %s %d: %w", op, id, storeFailure(err))
	}
	return c.utc(), nil
}

// customers runs query for the operation op and returns the customers it
// yields.
func (p *Postgres) customers(ctx context.Context, op, query string, args ...any) ([]Customer, error) {
	rows, _ := p.pool.Query(ctx, query, args...)
	cs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Customer])
	if err != nil {
		return nil, fmt.Errorf("keys: %s: %w", op, storeFailure(err))
	}
	for i := range cs {
		cs[i] = cs[i].utc()
	}
	return cs, nil
}
