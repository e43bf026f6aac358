package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateJobLimits(t *testing.T) {
	for _, tt := range []struct {
		name      string
		keys      []string
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "none"},
		{name: "two", keys: []string{"billing-db", "partner/api"}},
		{name: "as many as allowed", keys: strings.Split("a b c d", " ")},
		{name: "too many", keys: strings.Split("a b c d e", " "), wantField: "limits", wantMsg: "5 keys; at most 4"},
		{name: "twice", keys: []string{"a", "a"}, wantField: "limits[1]", wantMsg: "listed twice"},
		{name: "empty", keys: []string{"a", ""}, wantField: "limits[1]", wantMsg: "required"},
		{name: "invisible", keys: []string{"billing\u200bdb"}, wantField: "limits[0]", wantMsg: "invisible"},
		{name: "too long", keys: []string{strings.Repeat("k", MaxLimitKeyBytes+1)}, wantField: "limits[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			j.Limits = tt.keys
			checkFieldError(t, j.Validate(Limits{}), tt.wantField, tt.wantMsg)
		})
	}
}

func TestDecodeLimit(t *testing.T) {
	for _, tc := range []struct {
		doc, field string // field "" means valid
	}{
		{doc: `{"max_running": 5}`},
		{doc: `{"max_running": 0}`},
		{doc: `{"rate": {"count": 100, "per": "1m"}}`},
		{doc: `{"key": "k", "max_running": 1, "rate": {"count": 1, "per": "24h"}}`},
		{doc: `{}`, field: "max_running"},
		{doc: `{"max_running": -1}`, field: "max_running"},
		{doc: `{"max_running": null}`, field: "max_running"},
		{doc: `{"max_running": true}`, field: "max_running"},
		{doc: `{"rate": {"count": 1, "per": "0s"}}`, field: "rate.per"},
		{doc: `{"rate": {"count": 1, "per": "none"}}`, field: "rate.per"},
		{doc: `{"rate": {"count": -1, "per": "1s"}}`, field: "rate.count"},
		{doc: `{"rate": {"per": "1s"}}`, field: "rate.count"},
		{doc: `{"rate": null, "max_running": 1, "extra": 1}`, field: "extra"},
		{doc: `{"key": "a b\u0000"}`, field: "key"},
		{doc: `{"max_running": 1, "status": {"running": 3}}`},
	} {
		l, err := DecodeLimit(strings.NewReader(tc.doc))
		if err == nil {
			if l.Key == "" {
				l.Key = "k"
			}
			err = l.Validate()
		}
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.doc, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%s: got %v, want an invalid-limit error naming %s", tc.doc, err, tc.field)
		}
	}
	l := Limit{Key: "k", Rate: &LimitRate{Count: 1, Per: Duration(time.Minute)}}
	if err := l.Validate(); err != nil {
		t.Errorf("a rate alone: %v", err)
	}
}
