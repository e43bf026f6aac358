package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// Limits of credential documents.
const (
	// MaxPrefixBytes is the longest job-ID prefix scope.
	MaxPrefixBytes = 256
	// MaxDescriptionBytes is the longest description.
	MaxDescriptionBytes = 256
	// MinTTL is the shortest lifetime a credential may be created with: a
	// shorter one would expire before it could be handed over and used.
	MinTTL = time.Minute
)

// record is a credential as stored in etcd: the token document and the
// hash of its secret, never the secret.
type record struct {
	Token
	// Hash is the hex SHA-256 of the secret (see hashSecret).
	Hash string `json:"secret_sha256"`
}

// TokensPrefix returns the etcd prefix of the credentials of the cluster
// in namespace ns: each lives at TokensPrefix(ns)+ID.
func TokensPrefix(ns string) string { return ns + "auth/tokens/" }

// Defaults of StoreConfig.
const (
	// DefaultMaxPerCreator is StoreConfig.MaxPerCreator by default: the
	// most unexpired credentials one creator may hold.
	DefaultMaxPerCreator = 100
	// DefaultSweep is StoreConfig.Sweep by default: the most expired
	// credentials one Create or List removes.
	DefaultSweep = 32
)

// StoreConfig bounds what a Store keeps. A zero field means its default, a
// negative one unbounded.
type StoreConfig struct {
	// MaxPerCreator is the most unexpired credentials that one creator
	// (the credential that made them, or "" for those made directly in
	// etcd) may hold at once; Create refuses another with ErrTooMany.
	// Default DefaultMaxPerCreator. Issue, which replaces a credential of
	// a fixed ID, is not counted against it.
	MaxPerCreator int
	// Sweep is the most expired credentials one Create or List deletes
	// (each delete conditional on the credential's revision, so a
	// credential issued again under its ID is kept). Default DefaultSweep;
	// negative: none are deleted.
	Sweep int
}

// Store keeps credentials in etcd. It is safe for concurrent use. Reads go
// to etcd (linearizable); requests are authenticated from a Cache instead.
type Store struct {
	client *clientv3.Client
	prefix string
	now    func() time.Time
	cfg    StoreConfig
}

// NewStore returns the credential store of the cluster in namespace ns
// (ending in "/") with the default StoreConfig. now stamps creation and
// computes expiry; nil means time.Now.
func NewStore(client *clientv3.Client, ns string, now func() time.Time) *Store {
	return NewStoreConfig(client, ns, now, StoreConfig{})
}

// NewStoreConfig is NewStore with the bounds of cfg.
func NewStoreConfig(client *clientv3.Client, ns string, now func() time.Time, cfg StoreConfig) *Store {
	if now == nil {
		now = time.Now
	}
	if cfg.MaxPerCreator == 0 {
		cfg.MaxPerCreator = DefaultMaxPerCreator
	}
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	return &Store{client: client, prefix: TokensPrefix(ns), now: now, cfg: cfg}
}

// ValidateRequest checks a credential request; the error wraps ErrInvalid
// and names the field.
func ValidateRequest(req CreateRequest) error {
	_, err := expiry(req, time.Time{})
	return err
}

// expiry validates req and returns the expiry of a credential made at now
// (zero: none).
func expiry(req CreateRequest, now time.Time) (time.Time, error) {
	if !req.Role.Valid() {
		return time.Time{}, fmt.Errorf("%w: role: %q is not one of viewer, worker, operator, admin", ErrInvalid, req.Role)
	}
	if req.Prefix != "" && req.Role == RoleAdmin {
		return time.Time{}, fmt.Errorf("%w: prefix: an admin credential cannot be limited to a prefix (it manages credentials and the fleet)", ErrInvalid)
	}
	if err := checkText("prefix", req.Prefix, MaxPrefixBytes); err != nil {
		return time.Time{}, err
	}
	if req.Prefix != "" {
		// A prefix is the start of job IDs: a character no ID may hold
		// would make a credential that matches no job, or one that looks
		// like another team's.
		if err := api.ValidateNameText("prefix", req.Prefix); err != nil {
			return time.Time{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if err := checkWorkerLabels(req); err != nil {
		return time.Time{}, err
	}
	if err := checkText("description", req.Description, MaxDescriptionBytes); err != nil {
		return time.Time{}, err
	}
	if req.TTL == "" {
		return time.Time{}, nil
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl <= 0 {
		return time.Time{}, fmt.Errorf("%w: ttl: %q is not a positive duration such as \"720h\"", ErrInvalid, req.TTL)
	}
	if ttl < MinTTL {
		return time.Time{}, fmt.Errorf("%w: ttl: %q is shorter than the shortest lifetime, %s", ErrInvalid, req.TTL, MinTTL)
	}
	return now.Add(ttl).UTC(), nil
}

// checkText refuses a field longer than max bytes, not UTF-8, or holding
// control characters (descriptions and prefixes are printed by the CLI).
func checkText(field, s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("%w: %s: longer than %d bytes", ErrInvalid, field, max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s: not valid UTF-8", ErrInvalid, field)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s: holds a control character", ErrInvalid, field)
	}
	return nil
}

// ErrTooMany: the creator already holds StoreConfig.MaxPerCreator
// unexpired credentials. HTTP 409.
var ErrTooMany = errors.New("too many credentials")

// Create stores a new credential with a random ID and secret, made by
// credential createdBy ("" when made directly in etcd), and returns it with
// its bearer token (which is not stored and cannot be shown again) and the
// etcd revision of the write. It first deletes expired credentials (at
// most StoreConfig.Sweep), and refuses with ErrTooMany when createdBy
// already holds StoreConfig.MaxPerCreator unexpired ones: the count and
// the write are one transaction, conditional on no credential having been
// written since the count, so concurrent creates cannot pass the bound.
// Errors: ErrInvalid (naming the field), ErrTooMany, or etcd's.
func (s *Store) Create(ctx context.Context, req CreateRequest, createdBy string) (Created, int64, error) {
	if _, err := expiry(req, time.Time{}); err != nil {
		return Created{}, 0, err
	}
	for range 10 {
		held, rev, err := s.held(ctx, createdBy)
		if err != nil {
			return Created{}, 0, err
		}
		if max := s.cfg.MaxPerCreator; max > 0 && held >= max {
			who := "credential " + createdBy
			if createdBy == "" {
				who = "etcd (jobfleet token create --etcd-endpoints)"
			}
			return Created{}, 0, fmt.Errorf("%w: %s has made %d unexpired credentials, the most one creator may hold; revoke some (jobfleet token revoke ID) or let them expire",
				ErrTooMany, who, held)
		}
		// Nothing under the prefix written since the count, and the new
		// ID free.
		unchanged := clientv3.Compare(clientv3.ModRevision(s.prefix).WithPrefix(), "<", rev+1)
		c, wrote, err := s.put(ctx, newID(), req, createdBy, false, unchanged)
		if errors.Is(err, errIDTaken) {
			continue // a credential was written since the count, or 48 random bits collided: count again
		}
		return c, wrote, err
	}
	return Created{}, 0, fmt.Errorf("%w: credentials kept changing while this one was counted; retry", ErrUnavailable)
}

// ErrUnavailable: the store could not complete a request now (etcd
// unreachable, or contention); retry. HTTP 503.
var ErrUnavailable = errors.New("credential store unavailable")

// held counts the unexpired credentials made by createdBy, deleting
// expired ones on the way (at most StoreConfig.Sweep), and returns the
// revision the count was read at.
func (s *Store) held(ctx context.Context, createdBy string) (int, int64, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, 0, fmt.Errorf("auth: count credentials: %w", err)
	}
	now, n := s.now(), 0
	var expired []*mvccpb.KeyValue
	for _, kv := range resp.Kvs {
		var rec record
		if json.Unmarshal(kv.Value, &rec) != nil {
			continue
		}
		if rec.expired(now) {
			expired = append(expired, kv)
			continue
		}
		if rec.CreatedBy == createdBy {
			n++
		}
	}
	s.sweep(ctx, expired)
	return n, resp.Header.Revision, nil
}

// sweep deletes the expired credentials kvs, at most StoreConfig.Sweep of
// them, each only if it is still the record that was read (its mod
// revision): a credential issued again under the same ID since is kept.
// Deleting is idempotent, so members that notice the same credential
// concurrently do no harm; a failure is left for the next call.
func (s *Store) sweep(ctx context.Context, kvs []*mvccpb.KeyValue) (deleted map[string]bool) {
	if s.cfg.Sweep < 0 {
		return nil
	}
	deleted = make(map[string]bool)
	for _, kv := range kvs[:min(len(kvs), s.cfg.Sweep)] {
		key := string(kv.Key)
		resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit()
		if err == nil && resp.Succeeded {
			deleted[key] = true
		}
	}
	return deleted
}

// Issue stores credential id with a new secret, replacing any credential
// of that ID (whose token stops working), and returns it as Create does.
// It is for credentials with a well-known ID, such as those `jobfleet dev`
// makes on every start.
func (s *Store) Issue(ctx context.Context, id string, req CreateRequest, createdBy string) (Created, int64, error) {
	if err := ValidateID(id); err != nil {
		return Created{}, 0, err
	}
	return s.put(ctx, id, req, createdBy, true)
}

var errIDTaken = errors.New("credential ID taken")

// put writes credential id; replace overwrites one of that ID, else the
// write needs the ID free and the extra compares true (errIDTaken if not).
func (s *Store) put(ctx context.Context, id string, req CreateRequest, createdBy string, replace bool, extra ...clientv3.Cmp) (Created, int64, error) {
	now := s.now().UTC().Truncate(time.Millisecond)
	exp, err := expiry(req, now)
	if err != nil {
		return Created{}, 0, err
	}
	secret := newSecret()
	rec := record{
		Token: Token{ID: id, Role: req.Role, Prefix: req.Prefix, WorkerLabels: strings.TrimSpace(req.WorkerLabels), Description: req.Description,
			CreatedAt: now, ExpiresAt: exp, CreatedBy: createdBy},
		Hash: hashSecret(secret),
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return Created{}, 0, fmt.Errorf("auth: encode credential: %w", err)
	}
	key := s.prefix + id
	var rev int64
	if replace {
		resp, err := s.client.Put(ctx, key, string(val))
		if err != nil {
			return Created{}, 0, fmt.Errorf("auth: store credential %s: %w", id, err)
		}
		rev = resp.Header.Revision
	} else {
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, extra...)
		resp, err := s.client.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return Created{}, 0, fmt.Errorf("auth: store credential %s: %w", id, err)
		}
		if !resp.Succeeded {
			return Created{}, 0, errIDTaken
		}
		rev = resp.Header.Revision
	}
	return Created{Token: rec.Token, Secret: FormatToken(id, secret)}, rev, nil
}

// Limits of ListPage.
const (
	// DefaultListLimit is ListPage's page size for a limit of 0.
	DefaultListLimit = 100
	// MaxListLimit is the largest page ListPage returns.
	MaxListLimit = 1000
)

// List returns every stored credential, ordered by ID, reading it page by
// page; see ListPage.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	var out []Token
	cursor := ""
	for {
		page, next, err := s.ListPage(ctx, cursor, MaxListLimit)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.ID, b.ID) })
			return out, nil
		}
		cursor = next
	}
}

// ListPage returns up to limit credentials (DefaultListLimit if 0, at most
// MaxListLimit) with IDs after cursor ("" for the first page), ordered by
// ID, and the cursor of the next page ("" on the last). Expired
// credentials met on the page are deleted (at most StoreConfig.Sweep, as
// Create does) and left out; others that expired since may still be
// listed, marked by their ExpiresAt. Errors: ErrInvalid for a bad cursor
// or limit, or etcd's.
func (s *Store) ListPage(ctx context.Context, cursor string, limit int) ([]Token, string, error) {
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return nil, "", fmt.Errorf("%w: limit: %d is not from 1 to %d", ErrInvalid, limit, MaxListLimit)
	}
	from := s.prefix
	if cursor != "" {
		if err := ValidateID(cursor); err != nil {
			return nil, "", fmt.Errorf("%w: cursor: %q is not a credential ID", ErrInvalid, cursor)
		}
		from = s.prefix + cursor + "\x00" // the first key after the cursor's
	}
	resp, err := s.client.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.prefix)), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, "", fmt.Errorf("auth: list credentials: %w", err)
	}
	now := s.now()
	out := make([]Token, 0, len(resp.Kvs))
	var expired []*mvccpb.KeyValue
	for _, kv := range resp.Kvs {
		var rec record
		if json.Unmarshal(kv.Value, &rec) != nil {
			continue // not ours to show; the cache logs it
		}
		if rec.expired(now) {
			expired = append(expired, kv)
		}
		out = append(out, rec.Token)
	}
	if deleted := s.sweep(ctx, expired); len(deleted) > 0 {
		out = slices.DeleteFunc(out, func(t Token) bool { return deleted[s.prefix+t.ID] })
	}
	next := ""
	if resp.More && len(resp.Kvs) > 0 {
		next = strings.TrimPrefix(string(resp.Kvs[len(resp.Kvs)-1].Key), s.prefix)
	}
	return out, next, nil
}

// Verify reports whether token is the current bearer token of a stored,
// unexpired credential, reading etcd; it returns the credential. Requests
// are authenticated by a Cache instead; this is for tools that hold a
// token and an etcd client (`jobfleet dev` reusing its admin token).
// Errors: ErrUnauthenticated, or etcd's.
func (s *Store) Verify(ctx context.Context, token string) (Token, error) {
	id, secret, err := ParseToken(token)
	if err != nil {
		return Token{}, err
	}
	resp, err := s.client.Get(ctx, s.prefix+id)
	if err != nil {
		return Token{}, fmt.Errorf("auth: read credential %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return Token{}, fmt.Errorf("%w: unknown or revoked credential", ErrUnauthenticated)
	}
	var rec record
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return Token{}, fmt.Errorf("%w: credential %s is corrupt", ErrUnauthenticated, id)
	}
	if !hashMatches(secret, rec.Hash) {
		return Token{}, fmt.Errorf("%w: unknown or revoked credential", ErrUnauthenticated)
	}
	if rec.expired(s.now()) {
		return Token{}, fmt.Errorf("%w: credential %s expired at %s", ErrUnauthenticated, id, rec.ExpiresAt.Format(time.RFC3339))
	}
	return rec.Token, nil
}

// Revoke deletes credential id and returns the revision of the deletion;
// every member refuses the credential once its cache has seen it (within
// a second). ErrNotFound if there is no such credential.
func (s *Store) Revoke(ctx context.Context, id string) (int64, error) {
	if err := ValidateID(id); err != nil {
		return 0, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	resp, err := s.client.Delete(ctx, s.prefix+id)
	if err != nil {
		return 0, fmt.Errorf("auth: revoke credential %s: %w", id, err)
	}
	if resp.Deleted == 0 {
		return 0, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return resp.Header.Revision, nil
}

// expired reports whether the credential has expired at now.
func (r *record) expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}
