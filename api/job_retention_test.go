package api

import (
	"strings"
	"testing"
	"time"
)

func TestValidateRetention(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(j *Job)
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "fleet defaults", edit: func(j *Job) {}},
		{name: "max runs and age", edit: func(j *Job) { j.History = HistoryPolicy{MaxRuns: 20, MaxAge: Duration(72 * time.Hour)} }},
		{name: "max runs negative", edit: func(j *Job) { j.History.MaxRuns = -1 }, wantField: "history.max_runs", wantMsg: "out of range"},
		{name: "max runs too many", edit: func(j *Job) { j.History.MaxRuns = MaxHistoryRuns + 1 }, wantField: "history.max_runs"},
		{name: "max age negative", edit: func(j *Job) { j.History.MaxAge = -Duration(time.Hour) }, wantField: "history.max_age", wantMsg: "negative"},
		{name: "max age below a second", edit: func(j *Job) { j.History.MaxAge = Duration(time.Millisecond) }, wantField: "history.max_age", wantMsg: "shorter than the minimum of 1s"},
		{name: "max age too long", edit: func(j *Job) { j.History.MaxAge = MaxHistoryAge + 1 }, wantField: "history.max_age", wantMsg: "longer than"},
		{name: "delete after on a one-off", edit: func(j *Job) { j.Schedule = ""; j.DeleteAfter = "24h" }},
		{name: "delete after zero", edit: func(j *Job) { j.Schedule = ""; j.DeleteAfter = "0s" }},
		{name: "delete after never", edit: func(j *Job) { j.Schedule = ""; j.DeleteAfter = RetentionNever }},
		{name: "delete after on a schedule", edit: func(j *Job) { j.DeleteAfter = "24h" }, wantField: "delete_after", wantMsg: "one-off jobs"},
		{name: "delete after not a duration", edit: func(j *Job) { j.Schedule = ""; j.DeleteAfter = "forever" }, wantField: "delete_after", wantMsg: `"forever" is neither`},
		{name: "delete after negative", edit: func(j *Job) { j.Schedule = ""; j.DeleteAfter = "-1h" }, wantField: "delete_after", wantMsg: "negative"},
		{name: "delete after too long", edit: func(j *Job) { j.Schedule = ""; j.DeleteAfter = "100000h" }, wantField: "delete_after", wantMsg: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			tt.edit(&j)
			checkFieldError(t, j.Validate(DefaultLimits()), tt.wantField, tt.wantMsg)
		})
	}
}

func TestDecodeRetention(t *testing.T) {
	j, err := DecodeJob(strings.NewReader(`{"id":"x","executor":{"type":"http","url":"http://h/"},"history":{"max_runs":5,"max_age":"1h"},"delete_after":"never"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.History.MaxRuns != 5 || j.History.MaxAge != Duration(time.Hour) || j.DeleteAfter != RetentionNever {
		t.Fatalf("decoded %+v, %q", j.History, j.DeleteAfter)
	}
	if _, keep, set := j.DeleteAfter.Duration(); !keep || !set {
		t.Fatalf("never: keep %v set %v", keep, set)
	}
	if d, keep, set := Retention("36h").Duration(); d != 36*time.Hour || keep || !set {
		t.Fatalf("36h = %v, %v, %v", d, keep, set)
	}
	_, err = DecodeJob(strings.NewReader(`{"id":"x","history":{"max_run":5}}`), 0)
	if fe, ok := err.(*FieldError); !ok || fe.Field != "history.max_run" || !strings.Contains(fe.Msg, "unknown field") {
		t.Fatalf("misspelled history key: %v", err)
	}
}
