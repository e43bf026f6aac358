package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
)

// Discovery tells a worker which orchestrators to poll. The worker polls
// every orchestrator it is told of, since each hands out only the runs of
// the partitions it owns.
type Discovery interface {
	// Watch calls update with the orchestrators' base URLs (such as
	// "http://10.0.0.5:8080"), first as soon as they are known and then
	// whenever the set changes, until ctx is cancelled; it then returns
	// nil. Calls to update are not concurrent. Another error ends the
	// worker: Run shuts down and returns it. Watch must retry transient
	// failures itself.
	Watch(ctx context.Context, update func(addrs []string)) error
}

// EtcdEndpointer is implemented by a Discovery that reads the fleet from
// etcd, such as etcddiscovery.Members: the worker refuses those endpoints
// to "http" jobs, as it refuses the orchestrators.
type EtcdEndpointer interface {
	// EtcdEndpoints returns etcd's client URLs as the Discovery uses them.
	EtcdEndpoints() []string
}

// normalizeAddrs returns the distinct non-empty addresses of addrs, without
// trailing slashes, sorted.
func normalizeAddrs(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		a = strings.TrimRight(strings.TrimSpace(a), "/")
		if a != "" {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func validateBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("orchestrator URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("orchestrator URL %q is not an absolute http or https URL", raw)
	}
	if err := api.CheckPort(u); err != nil {
		return fmt.Errorf("orchestrator URL %q: %w", raw, err)
	}
	return nil
}

// Static is a fixed list of orchestrators. Create it with
// StaticOrchestrators.
type Static struct {
	addrs []string
}

// StaticOrchestrators returns a Discovery of the given orchestrator base
// URLs, which never changes.
func StaticOrchestrators(urls ...string) *Static {
	return &Static{addrs: normalizeAddrs(urls)}
}

// Validate reports whether the list is usable: at least one URL, each an
// absolute http or https URL.
func (s *Static) Validate() error {
	if len(s.addrs) == 0 {
		return errors.New("no orchestrator URL given")
	}
	for _, a := range s.addrs {
		if err := validateBaseURL(a); err != nil {
			return err
		}
	}
	return nil
}

// Watch reports the list once and waits for ctx.
func (s *Static) Watch(ctx context.Context, update func([]string)) error {
	update(slices.Clone(s.addrs))
	<-ctx.Done()
	return nil
}

// MemberList discovers orchestrators by reading GET /v1/cluster/members
// from any orchestrator it knows: first the seeds, then the members it
// has learned. Create it with MembersFrom; its fields may be changed before
// the worker runs.
type MemberList struct {
	// Seeds are the URLs asked first (any orchestrator of the fleet, or a
	// load balancer in front of them). They are not polled unless they are
	// also listed as members.
	Seeds []string
	// Interval is the time between refreshes; default 10s. After a failed
	// refresh the next one comes sooner, with back-off.
	Interval time.Duration
	// HTTPClient makes the requests. Nil means, when a Worker runs the
	// MemberList, the worker's own client (with its Config.TLS), and
	// http.DefaultClient otherwise. Run by a Worker, the requests carry
	// the worker's Config.Token.
	HTTPClient *http.Client
	// RequestTimeout bounds each request; default 5s.
	RequestTimeout time.Duration
	// Clock times the refreshes; nil means the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
}

// MembersFrom returns a Discovery that follows the fleet's members list,
// starting from the given orchestrator URLs.
func MembersFrom(seeds ...string) *MemberList {
	return &MemberList{Seeds: normalizeAddrs(seeds), Interval: 10 * time.Second, RequestTimeout: 5 * time.Second}
}

// Validate reports whether the seeds are usable.
func (d *MemberList) Validate() error {
	if len(d.Seeds) == 0 {
		return errors.New("no seed orchestrator URL given")
	}
	for _, a := range d.Seeds {
		if err := validateBaseURL(a); err != nil {
			return err
		}
	}
	if d.Interval < 0 || d.RequestTimeout < 0 {
		return errors.New("negative interval or request timeout")
	}
	return nil
}

// Watch refreshes the members list every Interval and reports the members'
// addresses when they change. For one Interval after a change (and after
// the first list) it refreshes every second instead: members of a fleet
// that is starting, or rolling, register one by one, and a worker that read
// the list before the others registered should not wait a whole Interval
// to poll them. While no orchestrator answers it keeps the last list and
// retries.
func (d *MemberList) Watch(ctx context.Context, update func([]string)) error {
	client := d.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	return d.watch(ctx, &apiClient{hc: client}, update, nil)
}

// watch is Watch with requests sent by c: a Worker running a MemberList
// reads the members with its own client, TLS settings and token, and
// tells creds (if not nil) whether its credentials were refused.
func (d *MemberList) watch(ctx context.Context, c *apiClient, update func([]string), creds *credentialLog) error {
	if err := d.Validate(); err != nil {
		return err
	}
	interval, reqTimeout := d.Interval, d.RequestTimeout
	if interval == 0 {
		interval = 10 * time.Second
	}
	if reqTimeout == 0 {
		reqTimeout = 5 * time.Second
	}
	clock, lg := d.Clock, d.Logger
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	seeds := normalizeAddrs(d.Seeds)
	bo := newBackOff(200*time.Millisecond, interval)
	var (
		last     []string // last reported
		reported bool
		failing  bool
		settling time.Time // refresh sooner until then
	)
	for {
		// Ask the members first (most likely current), then the seeds.
		try := append(slices.Clone(last), seeds...)
		addrs, err := fetchMembers(ctx, c, try, reqTimeout)
		if creds != nil && ctx.Err() == nil {
			var refused *CredentialError
			switch {
			case err == nil:
				creds.accepted(lg)
			case errors.As(err, &refused):
				creds.refused(lg, refusedBy(err), refused)
			}
		}
		wait := interval
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !failing {
				lg.Warn("cannot read the members list; keeping the last one", zap.Strings("tried", try), zap.Error(err))
				failing = true
			} else {
				lg.Debug("cannot read the members list", zap.Error(err))
			}
			wait = bo.Next()
		default:
			if failing {
				lg.Info("members list readable again")
				failing = false
			}
			bo.Reset()
			if !reported || !slices.Equal(addrs, last) {
				lg.Info("orchestrators discovered", zap.Strings("orchestrators", addrs))
				update(slices.Clone(addrs))
				last, reported = addrs, true
				settling = clock.Now().Add(interval)
			}
			if clock.Now().Before(settling) {
				wait = min(interval, settlingRefresh)
			}
		}
		if !retry.Sleep(ctx, clock, wait) {
			return nil
		}
	}
}

// settlingRefresh is MemberList's refresh interval while the list is
// settling.
const settlingRefresh = time.Second

// refusedBy returns the orchestrator named by fetchMembers' error about a
// refused credential.
func refusedBy(err error) string {
	var r *membersRefused
	if errors.As(err, &r) {
		return r.base
	}
	return ""
}

// membersRefused is fetchMembersFrom's error when base refused the
// worker's credentials.
type membersRefused struct {
	base string
	err  *CredentialError
}

func (e *membersRefused) Error() string {
	return fmt.Sprintf("GET %s/v1/cluster/members: %v", e.base, e.err)
}

func (e *membersRefused) Unwrap() error { return e.err }

// fetchMembers returns the member addresses from the first of urls that
// answers.
func fetchMembers(ctx context.Context, client *apiClient, urls []string, timeout time.Duration) ([]string, error) {
	var errs []error
	for _, base := range slices.Compact(urls) {
		addrs, err := fetchMembersFrom(ctx, client, base, timeout)
		if err == nil {
			return addrs, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func fetchMembersFrom(ctx context.Context, client *apiClient, base string, timeout time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := client.newRequest(ctx, http.MethodGet, base+"/v1/cluster/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, &membersRefused{base: base, err: &CredentialError{Status: resp.StatusCode}}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/v1/cluster/members: status %s", base, resp.Status)
	}
	var v api.View
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxOtherReplyBytes)).Decode(&v); err != nil {
		return nil, fmt.Errorf("GET %s/v1/cluster/members: %w", base, err)
	}
	return memberAddrs(v), nil
}

func memberAddrs(v api.View) []string {
	addrs := make([]string, 0, len(v.Members))
	for _, m := range v.Members {
		addrs = append(addrs, m.Addr)
	}
	return normalizeAddrs(addrs)
}
