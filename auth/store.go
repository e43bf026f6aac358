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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch/placement"
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

// Store keeps credentials in etcd. It is safe for concurrent use. Reads go
// to etcd (linearizable); requests are authenticated from a Cache instead.
type Store struct {
	client *clientv3.Client
	prefix string
	now    func() time.Time
}

// NewStore returns the credential store of the cluster in namespace ns
// (ending in "/"). now stamps creation and computes expiry; nil means
// time.Now.
func NewStore(client *clientv3.Client, ns string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{client: client, prefix: TokensPrefix(ns), now: now}
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

// checkWorkerLabels checks a credential request's worker label selector:
// only for a worker credential, and a selector that parses.
func checkWorkerLabels(req CreateRequest) error {
	if strings.TrimSpace(req.WorkerLabels) == "" {
		return nil
	}
	if req.Role != RoleWorker {
		return fmt.Errorf("%w: worker_labels: only a worker credential can be limited to worker labels (this one's role is %s)", ErrInvalid, req.Role)
	}
	if err := checkText("worker_labels", req.WorkerLabels, placement.MaxSelectorBytes); err != nil {
		return err
	}
	if _, err := placement.Parse(req.WorkerLabels); err != nil {
		return fmt.Errorf("%w: worker_labels: %q is not a label selector such as \"pool=gpu\": %s", ErrInvalid, req.WorkerLabels,
			strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": "))
	}
	return nil
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

// Create stores a new credential with a random ID and secret, made by
// credential createdBy ("" when made directly in etcd), and returns it with
// its bearer token (which is not stored and cannot be shown again) and the
// etcd revision of the write. Errors: ErrInvalid (naming the field), or
// etcd's.
func (s *Store) Create(ctx context.Context, req CreateRequest, createdBy string) (Created, int64, error) {
	for range 5 {
		c, rev, err := s.put(ctx, newID(), req, createdBy, false)
		if errors.Is(err, errIDTaken) {
			continue // 48 random bits collided: draw again
		}
		return c, rev, err
	}
	return Created{}, 0, errors.New("auth: could not find a free credential ID")
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

func (s *Store) put(ctx context.Context, id string, req CreateRequest, createdBy string, replace bool) (Created, int64, error) {
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
		resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val))).Commit()
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

// List returns every stored credential (expired ones included, marked by
// their ExpiresAt), ordered by ID.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("auth: list credentials: %w", err)
	}
	out := make([]Token, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec record
		if json.Unmarshal(kv.Value, &rec) != nil {
			continue // not ours to show; the cache logs it
		}
		out = append(out, rec.Token)
	}
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
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
