package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jobfleet/jobfleet/api"
)

// OutputOptions choose the attempt of GET /v1/runs/{id}/output.
type OutputOptions struct {
	// Item is the item whose attempt it is, nil for a run's own chain.
	Item *int
	// Attempt is the attempt's number; 0 for the latest.
	Attempt int
}

func (o OutputOptions) query(follow bool) url.Values {
	q := url.Values{}
	if o.Item != nil {
		q.Set("item", strconv.Itoa(*o.Item))
	}
	if o.Attempt > 0 {
		q.Set("attempt", strconv.Itoa(o.Attempt))
	}
	if follow {
		q.Set("follow", "1")
	}
	return q
}

// RunOutput returns an attempt's output (GET /v1/runs/{id}/output): the
// last bytes the owner of the run's partition holds while it runs (and a
// while after), else the output the run keeps. ErrNotFound if there is
// no such run.
func (c *Client) RunOutput(ctx context.Context, runID string, o OutputOptions) (api.RunOutput, error) {
	var out api.RunOutput
	_, err := c.do(ctx, request{method: http.MethodGet, path: runOutputPath(runID), query: o.query(false), out: &out})
	return out, err
}

func runOutputPath(runID string) string { return "/v1/runs/" + url.PathEscape(runID) + "/output" }

// FollowOutput follows an attempt's output as it runs (GET
// /v1/runs/{id}/output?follow=1): fn is called with each chunk in order
// (Skipped counts the bytes missed before it: a follower too slow for the
// ring skips ahead), until the attempt ends; it returns the end event's
// RunOutput (without output), fn's error, ctx's, or the request's. The
// client's Timeout does not apply: the stream lasts as long as the
// attempt.
func (c *Client) FollowOutput(ctx context.Context, runID string, o OutputOptions, fn func(api.OutputEvent) error) (api.RunOutput, error) {
	u := *c.base
	escaped := strings.TrimRight(c.base.EscapedPath(), "/") + runOutputPath(runID)
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return api.RunOutput{}, err
	}
	u.Path, u.RawPath, u.RawQuery = p, escaped, o.query(true).Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return api.RunOutput{}, err
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := *c.hc
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return api.RunOutput{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes))
		return api.RunOutput{}, replyError(resp, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8*api.MaxOutputChunkBytes) // a chunk's JSON, escapes included
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case line == "" && event != "":
			switch event {
			case api.EventOutput:
				var ev api.OutputEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return api.RunOutput{}, fmt.Errorf("output stream: bad event: %w", err)
				}
				if err := fn(ev); err != nil {
					return api.RunOutput{}, err
				}
			case api.EventEnd:
				var end api.RunOutput
				if err := json.Unmarshal([]byte(data), &end); err != nil {
					return api.RunOutput{}, fmt.Errorf("output stream: bad end event: %w", err)
				}
				return end, nil
			}
			event, data = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return api.RunOutput{}, fmt.Errorf("output stream: %w", err)
	}
	return api.RunOutput{}, fmt.Errorf("output stream: ended before the attempt did (the member went away?)")
}
