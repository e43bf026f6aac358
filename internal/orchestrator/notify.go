package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/tracing"
	"github.com/jobfleet/jobfleet/store"
)

// NotifyConfig configures the run notifications this member delivers for
// the partitions it owns.
type NotifyConfig struct {
	// URL and On are the fleet's default subscription, for jobs without
	// notify entries of their own: URL is told of their runs reaching a
	// status of On (empty: dead runs). Empty URL: no default.
	URL string
	On  []api.RunStatus
	// Policy is the destination policy of the deliveries, as the http
	// executor's (egress.Policy); the fleet's members and etcd
	// endpoints are always refused.
	Policy egress.Policy
	// SecretEnv lists the variables of this process's environment that
	// notify headers' secret references may name.
	SecretEnv []string
	// ConsoleURL is the console's base URL as operators reach it
	// ("https://jobfleet.example/ui/"), for the links to runs in
	// notifications of format "slack"; empty: no link.
	ConsoleURL string
	// Delivery bounds and paces the deliveries (notify.Config: pending
	// notifications per job, deliveries in flight on this member, to one
	// destination and for one job, how long one is retried). Its Sender,
	// Clock, Logger and Metrics are the member's own.
	Delivery notify.Config
}

// defaults returns the default subscription as notify entries (nil
// without a URL); an error names the bad field.
func (c NotifyConfig) defaults() ([]api.Notification, error) {
	if c.URL == "" {
		return nil, nil
	}
	on := c.On
	if len(on) == 0 {
		on = []api.RunStatus{api.RunDead}
	}
	ns := []api.Notification{{URL: c.URL, On: on}}
	if err := api.ValidateNotifications("notify-default", ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// Headers of a notification request, besides the notify entry's own.
const (
	HeaderNotifyEvent = "Jobfleet-Notify-Event"
)

// sender delivers notifications over HTTP through the destination
// policy.
type sender struct {
	client    *http.Client
	transport *egress.Transport
	members   func() []string
	secretEnv []string
	console   string // NotifyConfig.ConsoleURL
}

func newSender(c NotifyConfig, etcdEndpoints []string, members func() []string) (*sender, error) {
	p := c.Policy
	p.Fleet = append(slices.Clone(p.Fleet), etcdEndpoints...)
	if p.AllowFlag == "" {
		p.AllowFlag = "--notify-allow"
	}
	tr, err := egress.NewTransport(p)
	if err != nil {
		return nil, fmt.Errorf("%w: notify policy: %v", ErrInvalidConfig, err)
	}
	return &sender{
		transport: tr,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is not a delivery
		}},
		members:   members,
		secretEnv: c.SecretEnv,
		console:   c.ConsoleURL,
	}, nil
}

// CheckNotifications checks the URLs of notify entries ns (a job's)
// against the destination policy of this member's deliveries, as a
// delivery checks them before it connects: hosts as written (a name's
// addresses are checked when a delivery connects). The error is a
// *api.FieldError naming the entry's url and the rule that refuses it,
// with the setting that would allow it (--notify-allow) for a default
// denial. Nil before the member has joined the cluster (nothing
// delivers yet) and for entries the policy permits.
func (o *Orchestrator) CheckNotifications(ns []api.Notification) error {
	o.mu.Lock()
	s := o.notifier
	o.mu.Unlock()
	if s == nil {
		return nil
	}
	s.transport.SetOrchestrators(s.members())
	for i, n := range ns {
		u, err := url.Parse(n.URL)
		if err != nil {
			continue // validation says what is wrong with it
		}
		if err := s.transport.CheckURL(u); err != nil {
			return &api.FieldError{Field: fmt.Sprintf("notify[%d].url", i), Msg: fmt.Sprintf("%s: notifications would not be delivered: %v", n.URL, err)}
		}
	}
	return nil
}

// Send POSTs the run document to the notification's URL (or, for
// format "slack", the message made of it); nil on 2xx. While tracing is
// on, the try is a span of the run's trace, and the request carries its
// traceparent.
func (s *sender) Send(ctx context.Context, o store.Outbox) (err error) {
	s.transport.SetOrchestrators(s.members())
	ctx, end := traceNotify(ctx, o)
	defer func() { end(err) }()
	body := o.Run
	if o.Format == api.NotifySlack {
		if body, err = notify.SlackBody(o, s.console); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	// In name order: see the worker's http executor.
	for _, name := range slices.Sorted(maps.Keys(o.Headers)) {
		v := o.Headers[name]
		val := v.Value
		if v.IsSecret() {
			if !slices.Contains(s.secretEnv, v.SecretEnv) {
				return fmt.Errorf("header %s: secret reference %s is not on --notify-secret-env", name, v.SecretEnv)
			}
			var ok bool
			if val, ok = os.LookupEnv(v.SecretEnv); !ok {
				return fmt.Errorf("header %s: variable %s is not set", name, v.SecretEnv)
			}
		}
		req.Header.Set(name, val)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jobfleet-notify")
	req.Header.Set(worker.HeaderRunID, o.RunID)
	req.Header.Set(worker.HeaderJobID, api.EscapeID(o.JobID))
	req.Header.Set(worker.HeaderAttempt, strconv.Itoa(o.Attempt))
	req.Header.Set(HeaderNotifyEvent, string(o.Event))
	if tp := tracing.TraceParent(ctx); tp != "" {
		req.Header.Set("Traceparent", tp)
	}
	resp, err := s.client.Do(req)
	if errors.Is(err, egress.ErrDestinationDenied) {
		return fmt.Errorf("%w: %w", notify.ErrRefused, err)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errors.New("answered " + resp.Status)
	}
	return nil
}

// traceNotify starts the span of one try of notification o, a child of
// its run's fire when the document it delivers names the run's trace;
// end ends it with the try's error. A no-op while tracing is off.
func traceNotify(ctx context.Context, o store.Outbox) (context.Context, func(error)) {
	if !tracing.Enabled() {
		return ctx, func(error) {}
	}
	var doc struct {
		TraceParent string `json:"traceparent"`
	}
	_ = json.Unmarshal(o.Run, &doc) // a misfire or overdue document has none
	ctx, span := tracing.Tracer().Start(tracing.Parent(ctx, doc.TraceParent), tracing.SpanNotify,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			tracing.AttrJob.String(o.JobID), tracing.AttrRun.String(o.RunID), tracing.AttrEvent.String(string(o.Event)),
			tracing.AttrAttempt.Int(o.Attempt), attribute.String("jobfleet.format", o.Format),
			tracing.AttrURL.String(redactQuery(o.URL))))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// redactQuery returns u without its query, which may hold a secret.
func redactQuery(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	p.RawQuery, p.User = "", nil
	return p.String()
}
