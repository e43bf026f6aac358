package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/store"
)

// StorageFunc reads etcd's storage as the member sees it now (GET
// /v1/cluster/storage); *orchestrator.Orchestrator.Storage is one.
type StorageFunc func(ctx context.Context) (storage.Report, error)

// storageHandler serves GET /v1/cluster/storage from get; nil answers
// 503.
func storageHandler(get StorageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if get == nil {
			WriteError(w, http.StatusServiceUnavailable, "this member does not report storage")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
		defer cancel()
		rep, err := get(ctx)
		switch {
		case errors.Is(store.Classify(err), store.ErrUnavailable):
			WriteError(w, http.StatusServiceUnavailable, "cannot read etcd's storage: "+err.Error())
		case err != nil:
			WriteError(w, http.StatusInternalServerError, err.Error())
		default:
			WriteJSON(w, http.StatusOK, rep)
		}
	})
}
