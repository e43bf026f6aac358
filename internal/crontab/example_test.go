package crontab_test

import (
	"fmt"
	"strings"

	"github.com/jobfleet/jobfleet/internal/crontab"
)

func ExampleParse() {
	const tab = `# backups
MAILTO=ops@example.com
CRON_TZ=Europe/Berlin
0 2 * * * /usr/local/bin/backup.sh --full
@reboot /usr/local/bin/start-tunnel
*/10 * * * * curl -fsS https://example.com/ping?t=$(date +\%s)
`
	res, err := crontab.Parse(strings.NewReader(tab), crontab.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range res.Jobs {
		fmt.Printf("%s %q %s %q\n", e.Job.ID, e.Job.Schedule, e.Job.Timezone, e.Job.Executor.Command)
	}
	for _, p := range res.Skipped {
		fmt.Printf("line %d skipped: %s\n", p.Line, p.Reason)
	}
	// Output:
	// crontab/backup-sh-full-85420ee0 "0 2 * * *" Europe/Berlin ["/usr/bin/env" "MAILTO=ops@example.com" "CRON_TZ=Europe/Berlin" "PATH=/usr/bin:/bin" "/bin/sh" "-c" "/usr/local/bin/backup.sh --full"]
	// crontab/curl-fss-https-example-com-ping-t-date-s-488ed74d "*/10 * * * *" Europe/Berlin ["/usr/bin/env" "MAILTO=ops@example.com" "CRON_TZ=Europe/Berlin" "PATH=/usr/bin:/bin" "/bin/sh" "-c" "curl -fsS https://example.com/ping?t=$(date +%s)"]
	// line 2 skipped: MAILTO not reproduced: cron mails a job's output, jobfleet records it in each run's attempts; MAILTO is still passed to the commands, as cron passes it
	// line 5 skipped: @reboot is not supported: jobfleet has no notion of a machine starting
}
