package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newCalendarCmd() *cobra.Command {
	return newClientGroupCmd("calendar", "Manage calendars: named dates and ranges that jobs exclude (\"exclude\": [NAME])",
		newCalendarSetCmd, newCalendarGetCmd, newCalendarListCmd, newCalendarRemoveCmd)
}

func newCalendarSetCmd(opts *clientOptions) *cobra.Command {
	var (
		file   string
		cal    api.Calendar
		ranges []string
	)
	cmd := &cobra.Command{
		Use:   "set NAME (-f FILE | --date DAY ... --range FROM/TO ...)",
		Short: "Create or replace a calendar from a document (-f FILE, - for standard input) or from flags",
		Example: `  jobfleet calendar set us-holidays --timezone America/New_York --date 2026-12-25 --date 2026-07-03
  jobfleet calendar set year-end --range 2026-12-24T12:00/2027-01-02
  jobfleet calendar set us-holidays -f us-holidays.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := resourceDocument(cmd, file, []string{"timezone", "description", "date", "range"}, func(given []string) error {
				return fmt.Errorf("-f takes the whole calendar from the file; do not combine it with %s", strings.Join(given, ", "))
			}, func() ([]byte, error) {
				cal.Name = args[0]
				for _, r := range ranges {
					from, to, ok := strings.Cut(r, "/")
					if !ok {
						return nil, fmt.Errorf("--range %q: want FROM/TO, such as 2026-12-24T12:00/2027-01-02", r)
					}
					cal.Ranges = append(cal.Ranges, api.DateRange{From: from, To: to})
				}
				return json.Marshal(cal)
			})
			if err != nil {
				return err
			}
			stored, verb, err := putResource(cmd, opts, func(ctx context.Context, c *client.Client) (api.Calendar, bool, error) {
				return c.PutCalendarJSON(ctx, args[0], doc)
			})
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, stored)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s calendar %q (%d dates, %d ranges, in %s)\n", verb, stored.Name, len(stored.Dates), len(stored.Ranges), stored.Timezone)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "calendar document (JSON); - reads standard input")
	cmd.Flags().StringVar(&cal.Timezone, "timezone", "", "IANA zone the dates and ranges are read in (default UTC)")
	cmd.Flags().StringVar(&cal.Description, "description", "", "what the calendar is for")
	cmd.Flags().StringArrayVar(&cal.Dates, "date", nil, "a whole day to exclude, YYYY-MM-DD (repeatable)")
	cmd.Flags().StringArrayVar(&ranges, "range", nil, "local time to exclude, FROM/TO with TO excluded, each YYYY-MM-DD[THH:MM[:SS]] (repeatable)")
	return cmd
}

func newCalendarGetCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use: "get NAME", Short: "Show a calendar", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cal, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.Calendar, error) { return c.GetCalendar(ctx, args[0]) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, cal)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "NAME\t%s\n", cell(cal.Name))
			fmt.Fprintf(tw, "TIMEZONE\t%s\n", cell(cal.Timezone))
			if cal.Description != "" {
				fmt.Fprintf(tw, "DESCRIPTION\t%s\n", cell(cal.Description))
			}
			for _, d := range cal.Dates {
				fmt.Fprintf(tw, "DATE\t%s\n", cell(d))
			}
			for _, r := range cal.Ranges {
				fmt.Fprintf(tw, "RANGE\t%s to %s (excluded)\n", cell(r.From), cell(r.To))
			}
			fmt.Fprintf(tw, "UPDATED\t%s\n", timeText(cal.UpdatedAt))
			return tw.Flush()
		},
	}
}

func newCalendarListCmd(opts *clientOptions) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List calendars, by name", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := listResources(cmd, opts, prefix, func(ctx context.Context, c *client.Client, o client.ListOptions) ([]api.Calendar, string, error) {
				page, err := c.ListCalendars(ctx, o)
				return page.Calendars, page.NextCursor, err
			})
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, api.CalendarList{Calendars: all})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTIMEZONE\tDATES\tRANGES\tDESCRIPTION")
			for _, c := range all {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", cell(c.Name), cell(c.Timezone), len(c.Dates), len(c.Ranges), cell(clip(c.Description, 60)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only calendars whose name starts with this")
	return cmd
}

func newCalendarRemoveCmd(opts *clientOptions) *cobra.Command {
	return newRemoveCmd(opts, "rm NAME", "Delete a calendar; jobs that exclude it exclude nothing from then on", "calendar",
		func(ctx context.Context, c *client.Client, name string) error { return c.DeleteCalendar(ctx, name) })
}
