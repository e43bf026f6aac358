package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/cursor"
)

// TokenStore keeps credentials; *auth.Store implements it.
type TokenStore interface {
	Create(ctx context.Context, req api.CreateRequest, createdBy string) (api.Created, int64, error)
	ListPage(ctx context.Context, cursor string, limit int) ([]api.Token, string, error)
	Revoke(ctx context.Context, id string) (int64, error)
}

// maxTokenBody caps a POST /v1/tokens body.
const maxTokenBody = 16 << 10

// effectWait bounds how long a create or revoke waits for this member's
// credential cache to apply it, so that the credential works (or stops
// working) here as soon as the reply arrives.
const effectWait = 2 * time.Second

// tokensAPI serves /v1/tokens.
type tokensAPI struct {
	tokens   TokenStore
	auth     Authenticator
	insecure bool // authentication is off: the routes are refused
	cursors  listCursors
}

// errTokensInsecure refuses the token routes of a member without
// authentication: every request there is the anonymous admin, and a
// credential it made would be accepted by every member of the fleet.
const errTokensInsecure = "credentials cannot be managed on a member with authentication off (--insecure-no-auth): " +
	"an anonymous request would mint a credential every member accepts; use a member with authentication, or jobfleet token create --etcd-endpoints"

func (t *tokensAPI) store(w http.ResponseWriter) bool {
	if t.insecure {
		WriteError(w, http.StatusForbidden, errTokensInsecure)
		return false
	}
	if t.tokens == nil {
		WriteError(w, http.StatusServiceUnavailable, "this member does not manage credentials")
		return false
	}
	return true
}

// inEffect waits (bounded) until this member's cache has applied the
// write at rev.
func (t *tokensAPI) inEffect(ctx context.Context, rev int64) {
	if t.auth == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, effectWait)
	defer cancel()
	_ = t.auth.WaitRevision(ctx, rev) // other members apply it within a second anyway
}

func (t *tokensAPI) create(w http.ResponseWriter, r *http.Request) {
	if !t.store(w) {
		return
	}
	var req api.CreateRequest
	if err := decodeBody(w, r, maxTokenBody, &req); err != nil {
		WriteError(w, bodyStatus(err), "malformed credential request: "+bodyMessage(err))
		return
	}
	if err := auth.ValidateRequest(req); err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	p, _ := auth.FromContext(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	c, rev, err := t.tokens.Create(ctx, req, p.ID)
	if err != nil {
		tokenError(w, err)
		return
	}
	t.inEffect(r.Context(), rev)
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusCreated, c)
}

func (t *tokensAPI) list(w http.ResponseWriter, r *http.Request) {
	if !t.store(w) {
		return
	}
	limit, err := limitParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	after, seal, ok := t.cursors.open(w, r, cursor.Listing{Kind: "tokens"})
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	list, next, err := t.tokens.ListPage(ctx, after, limit)
	if err != nil {
		tokenError(w, err)
		return
	}
	if list == nil {
		list = []api.Token{}
	}
	WriteJSON(w, http.StatusOK, api.TokenList{Tokens: list, NextCursor: seal(next)})
}

func (t *tokensAPI) revoke(w http.ResponseWriter, r *http.Request) {
	if !t.store(w) {
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	rev, err := t.tokens.Revoke(ctx, id)
	if err != nil {
		tokenError(w, err)
		return
	}
	t.inEffect(r.Context(), rev)
	w.WriteHeader(http.StatusNoContent)
}

// tokenError answers a credential store error: 400 invalid, 404 unknown,
// 409 when the creator holds as many credentials as it may, 503
// otherwise (etcd).
func tokenError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, auth.ErrInvalid):
		WriteError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, auth.ErrNotFound):
		WriteError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, auth.ErrTooMany):
		WriteError(w, http.StatusConflict, err.Error())
	default:
		WriteError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// The etcd credential store and the cache serve the endpoints.
var (
	_ TokenStore    = (*auth.Store)(nil)
	_ Authenticator = (*auth.Cache)(nil)
)
