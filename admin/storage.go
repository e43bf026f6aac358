package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// storageHandler serves GET /v1/cluster/storage from get
// (Member.Storage).
func storageHandler(get func(ctx context.Context) (api.StorageReport, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
