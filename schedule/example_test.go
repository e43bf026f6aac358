package schedule_test

import (
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/schedule"
)

func ExampleParse() {
	s, err := schedule.Parse("0 2 * * *", "Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	after := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	fmt.Println(s.Next(after))

	_, err = schedule.Parse("0 0 30 2 *", "UTC")
	fmt.Println(err)
	// Output:
	// 2026-07-02 00:00:00 +0000 UTC
	// schedule never fires: "0 0 30 2 *" names no existing date
}

func ExampleParse_every() {
	// "@every" instants are multiples of the interval since the Unix epoch.
	s, err := schedule.Parse("@every 15m", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	t := time.Date(2026, 7, 1, 12, 7, 0, 0, time.UTC)
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.Format(time.TimeOnly))
	}
	// Output:
	// 12:15:00
	// 12:30:00
	// 12:45:00
}

func ExampleDue() {
	s, err := schedule.Parse("@hourly", "UTC")
	if err != nil {
		fmt.Println(err)
		return
	}
	// The partition had no owner from 10:00 until 14:30.
	last := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	now := time.Date(2026, 7, 1, 14, 30, 0, 0, time.UTC)

	for _, policy := range []schedule.MisfirePolicy{schedule.RunOnce, schedule.Skip, schedule.RunAll} {
		d, err := schedule.Due(s, last, now, schedule.Policy{Misfire: policy, MaxFires: 3})
		if err != nil {
			fmt.Println(err)
			return
		}
		var fires []string
		for _, f := range d.Fires {
			fires = append(fires, f.Format("15:04"))
		}
		fmt.Printf("%-8s fire %v, skipped %d, dropped %d, next %s\n",
			policy, fires, d.Skipped, d.Dropped, d.Next.Format("15:04"))
	}
	// Output:
	// run_once fire [14:00], skipped 3, dropped 0, next 15:00
	// skip     fire [], skipped 4, dropped 0, next 15:00
	// run_all  fire [12:00 13:00 14:00], skipped 0, dropped 1, next 15:00
}

func ExampleOnce() {
	runAt := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := schedule.Once(runAt)
	fmt.Println(s.Next(runAt.Add(-time.Hour)))
	fmt.Println(s.Next(runAt).IsZero())
	// Output:
	// 2026-12-01 00:00:00 +0000 UTC
	// true
}

func ExampleParse_daylightSavingTime() {
	// On 2026-03-08 New York's clocks jump from 02:00 to 03:00: a job at
	// 02:30 runs at the jump, as cron does.
	s, err := schedule.Parse("30 2 * * *", "America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	ny := s.Location()
	t := time.Date(2026, 3, 7, 12, 0, 0, 0, ny)
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.In(ny).Format("2006-01-02 15:04 MST"))
	}
	// Output:
	// 2026-03-08 03:00 EDT
	// 2026-03-09 02:30 EDT
	// 2026-03-10 02:30 EDT
}

func ExampleSchedule_WithJitter() {
	// A fleet of hourly jobs, each delayed by up to 5 minutes: the offset
	// depends on the job's ID and the hour, never on who computes it.
	hourly, _ := schedule.Parse("@hourly", "")
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{"billing/invoices", "billing/reminders"} {
		s := hourly.WithJitter(5*time.Minute, id).Within(time.Time{}, at.Add(24*time.Hour))
		off := s.Offset(at)
		fmt.Println(id, off < 5*time.Minute, s.FireTime(at).Equal(at.Add(off)), s.Next(at.Add(-time.Second)).Equal(at))
	}
	// Output:
	// billing/invoices true true true
	// billing/reminders true true true
}
