package admin

import (
	"context"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
)

// deliveryReader reads a job's notification delivery records;
// *store.Etcd implements it.
type deliveryReader interface {
	Deliveries(ctx context.Context, id string) ([]api.NotificationDelivery, error)
}

// notifications serves GET /v1/jobs/{id}/notifications: the delivery
// records of the job's latest notifications, newest first (404 if there
// is no such job).
func (a *jobsAPI) notifications(w http.ResponseWriter, r *http.Request) {
	s, ctx, cancel, id, ok := a.jobStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	if _, err := s.Get(ctx, id); err != nil {
		a.fail(w, r, id, err)
		return
	}
	out := api.NotificationDeliveries{Deliveries: []api.NotificationDelivery{}}
	if dr, ok := s.(deliveryReader); ok {
		ds, err := dr.Deliveries(ctx, id)
		if err != nil {
			a.fail(w, r, id, err)
			return
		}
		out.Deliveries = ds
	}
	a.reply(w, r, http.StatusOK, out)
}

// addDeliveries sets run's Notifications from its job's delivery
// records; a failed read leaves it without (the run is what was asked).
func (a *jobsAPI) addDeliveries(ctx context.Context, s JobStore, run *api.Run) {
	dr, ok := s.(deliveryReader)
	if !ok {
		return
	}
	ds, err := dr.Deliveries(ctx, run.JobID)
	if err != nil {
		return
	}
	for _, d := range ds {
		if d.RunID == run.ID {
			run.Notifications = append(run.Notifications, d)
		}
	}
}
