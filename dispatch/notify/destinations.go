package notify

import (
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The destinations of a deliverer: their turns, lanes and names.

// pruneLocked takes the destinations without pending notifications out
// of the turns, and forgets those that hold nothing worth keeping.
func (d *Deliverer) pruneLocked(now time.Time) {
	kept := d.order[:0]
	for i, dest := range d.order {
		if len(dest.lanes) > 0 {
			kept = append(kept, dest)
			continue
		}
		if i < d.turn {
			d.turn--
		}
		dest.queued = false
	}
	clear(d.order[len(kept):])
	d.order = kept
	for name, dest := range d.dests {
		if !dest.queued && dest.inFlight == 0 && dest.br.idle(now) {
			delete(d.dests, name)
		}
	}
}

// destLocked returns the destination of url, in the turns.
func (d *Deliverer) destLocked(url string) *destination {
	name := destinationOf(url)
	dest := d.dests[name]
	if dest == nil {
		dest = &destination{name: name, byJob: map[*jobQueue]*lane{}}
		d.dests[name] = dest
	}
	if !dest.queued {
		dest.queued = true
		d.order = append(d.order, dest)
	}
	return dest
}

// laneLocked returns job's lane at dest.
func (dest *destination) laneLocked(o *Outbox, job *jobQueue) *lane {
	if l := dest.byJob[job]; l != nil {
		return l
	}
	l := &lane{o: o, job: job}
	dest.lanes = append(dest.lanes, l)
	dest.byJob[job] = l
	return l
}

func (dest *destination) dropLaneLocked(l *lane) {
	i := slices.Index(dest.lanes, l)
	if i < 0 {
		return
	}
	delete(dest.byJob, l.job)
	dest.lanes = slices.Delete(dest.lanes, i, i+1)
	if i < dest.turn {
		dest.turn--
	}
	if len(dest.lanes) > 0 {
		dest.turn %= len(dest.lanes)
	} else {
		dest.turn = 0
	}
}

// destinationOf names the destination of a notification URL: its scheme,
// host (lower case) and port (the scheme's if none); the URL itself if it
// does not parse (each such URL is then a destination of its own).
func destinationOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redactedURL returns raw without its query (for logs).
func redactedURL(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		return raw[:i] + "?…"
	}
	return raw
}
