package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeCalendar(t *testing.T) {
	for _, tc := range []struct {
		doc, field, msg string
	}{
		{doc: `{"name":"us-holidays","timezone":"America/New_York","dates":["2026-12-25"],"ranges":[{"from":"2026-12-31T18:00","to":"2027-01-02"}]}`},
		{doc: `{"name":"a","dates":["2026-12-25"],"dates":[]}`, field: "calendar", msg: "duplicate key \"dates\""},
		{doc: `{"name":"a","Dates":[]}`, field: "Dates"},
		{doc: `{"name":"a","holidays":[]}`, field: "holidays"},
		{doc: `{"name":"a","ranges":[{"from":"2026-01-01","to":"2026-01-02","note":"x"}]}`, field: "ranges[0].note"},
		{doc: `[]`, field: "calendar"},
		{doc: `{"name":"a"} {}`, field: "calendar", msg: "after the document"},
		{doc: `{"name":"a","description":"` + strings.Repeat("x", MaxCalendarBytes) + `"}`, field: "calendar", msg: "more than"},
	} {
		_, err := DecodeCalendar(strings.NewReader(tc.doc))
		if tc.field == "" {
			if err != nil {
				t.Errorf("DecodeCalendar(%.60s): %v", tc.doc, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) || !errors.Is(err, ErrInvalidCalendar) {
			t.Errorf("DecodeCalendar(%.60s): got %v, want a calendar error about %s containing %q", tc.doc, err, tc.field, tc.msg)
		}
	}
}

func TestValidateCalendar(t *testing.T) {
	many := make([]string, MaxCalendarEntries+1)
	for i := range many {
		many[i] = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format(dateLayout)
	}
	for _, tc := range []struct {
		name  string
		cal   Calendar
		field string
		msg   string
	}{
		{name: "valid", cal: Calendar{Name: "team a/holidays", Timezone: "Europe/Berlin", Dates: []string{"2026-12-25", "2026-12-26"}, Ranges: []DateRange{{From: "2026-12-24T12:00", To: "2026-12-24T18:30:15"}}}},
		{name: "no name", cal: Calendar{}, field: "name", msg: "required"},
		{name: "name with a zero-width space", cal: Calendar{Name: "us\u200bholidays"}, field: "name", msg: "invisible"},
		{name: "name too long", cal: Calendar{Name: strings.Repeat("a", MaxCalendarNameBytes+1)}, field: "name"},
		{name: "unknown zone", cal: Calendar{Name: "a", Timezone: "Mars/Olympus"}, field: "timezone"},
		{name: "zone in the wrong case", cal: Calendar{Name: "a", Timezone: "europe/berlin"}, field: "timezone"},
		{name: "description too long", cal: Calendar{Name: "a", Description: strings.Repeat("x", MaxCalendarDescriptionBytes+1)}, field: "description"},
		{name: "too many entries", cal: Calendar{Name: "a", Dates: many}, field: "dates", msg: "at most 1000"},
		{name: "not a date", cal: Calendar{Name: "a", Dates: []string{"2026-12-25", "25.12.2026"}}, field: "dates[1]", msg: "not a date"},
		{name: "no such date", cal: Calendar{Name: "a", Dates: []string{"2026-02-30"}}, field: "dates[0]"},
		{name: "a date given twice", cal: Calendar{Name: "a", Dates: []string{"2026-12-25", "2026-12-25"}}, field: "dates[1]", msg: "twice"},
		{name: "range with an offset", cal: Calendar{Name: "a", Ranges: []DateRange{{From: "2026-12-24T12:00:00Z", To: "2026-12-25"}}}, field: "ranges[0].from", msg: "not a local time"},
		{name: "range empty", cal: Calendar{Name: "a", Ranges: []DateRange{{From: "2026-12-25", To: "2026-12-25"}}}, field: "ranges[0].to", msg: "empty"},
		{name: "range reversed", cal: Calendar{Name: "a", Ranges: []DateRange{{From: "2026-12-26", To: "2026-12-25T23:00"}}}, field: "ranges[0].to"},
		{name: "range end missing", cal: Calendar{Name: "a", Ranges: []DateRange{{From: "2026-12-26"}}}, field: "ranges[0].to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cal
			c.Normalize()
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) || !errors.Is(err, ErrInvalidCalendar) {
				t.Fatalf("Validate: got %v, want a calendar error about %s containing %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestCalendarExcludes(t *testing.T) {
	c := Calendar{Name: "ny", Timezone: "America/New_York", Dates: []string{"2026-12-25", "2026-03-08"},
		Ranges: []DateRange{{From: "2026-12-31T18:00", To: "2027-01-02"}, {From: "2027-01-01T12:00", To: "2027-01-01T13:00"}}}
	cc, err := c.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   string
		want bool
	}{
		{"2026-12-25T04:59:59Z", false}, // 23:59:59 EST on the 24th
		{"2026-12-25T05:00:00Z", true},  // midnight EST
		{"2026-12-26T04:59:59Z", true},
		{"2026-12-26T05:00:00Z", false},
		// 2026-03-08 is 23 hours long in New York (spring forward).
		{"2026-03-08T05:00:00Z", true},
		{"2026-03-09T03:59:59Z", true},
		{"2026-03-09T04:00:00Z", false},
		{"2026-12-31T22:59:59Z", false},
		{"2026-12-31T23:00:00Z", true}, // 18:00 EST
		{"2027-01-01T17:30:00Z", true}, // in both ranges
		{"2027-01-02T04:59:59Z", true},
		{"2027-01-02T05:00:00Z", false}, // the end is excluded
	} {
		at, _ := time.Parse(time.RFC3339, tc.at)
		if got := cc.Excludes(at); got != tc.want {
			t.Errorf("Excludes(%s): got %v, want %v", tc.at, got, tc.want)
		}
	}
	cals := Calendars{"ny": cc}
	christmas, _ := time.Parse(time.RFC3339, "2026-12-25T12:00:00Z")
	if got := cals.Excluding([]string{"other", "ny"}, christmas); got != "ny" {
		t.Errorf("Excluding: got %q, want ny", got)
	}
	if got := cals.Excluding([]string{"other"}, christmas); got != "" {
		t.Errorf("Excluding by a calendar not held: got %q, want none", got)
	}
	if got := Calendars(nil).Excluding([]string{"ny"}, christmas); got != "" {
		t.Errorf("Excluding without calendars: got %q, want none", got)
	}
}

func BenchmarkCalendarExcludes(b *testing.B) {
	c := Calendar{Name: "big"}
	for i := range MaxCalendarEntries {
		c.Dates = append(c.Dates, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 2*i).Format(dateLayout))
	}
	cc, err := c.Compile()
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; b.Loop(); i++ {
		cc.Excludes(at.Add(time.Duration(i%1000) * time.Hour))
	}
}
