// Package report renders benchmark results: aligned text tables for the
// terminal, CSV and JSON files for tools, and PNG line and bar charts
// (gonum.org/v1/plot) for the docs. It knows nothing about what was
// measured.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Table is one table of results.
type Table struct {
	// Name is the file name stem of its CSV (name.csv).
	Name string `json:"name"`
	// Title is printed above it.
	Title string `json:"title"`
	// Columns are the header; every row has as many cells.
	Columns []string `json:"columns"`
	// Rows are the cells, already formatted.
	Rows [][]string `json:"rows"`
	// Notes are printed below it.
	Notes []string `json:"notes,omitempty"`
	// FileOnly tables are written as CSV but not printed (too long for a
	// terminal).
	FileOnly bool `json:"-"`
}

// Add appends a row; values are formatted with Cell.
func (t *Table) Add(values ...any) {
	row := make([]string, len(values))
	for i, v := range values {
		row[i] = Cell(v)
	}
	t.Rows = append(t.Rows, row)
}

// Cell formats one value: floats with up to 3 significant decimals,
// everything else with %v.
func Cell(v any) string {
	switch x := v.(type) {
	case float64:
		switch {
		case x == 0:
			return "0"
		case x >= 100 || x <= -100:
			return fmt.Sprintf("%.0f", x)
		case x >= 10 || x <= -10:
			return fmt.Sprintf("%.1f", x)
		default:
			return fmt.Sprintf("%.2f", x)
		}
	case string:
		return x
	default:
		return fmt.Sprint(v)
	}
}

// Print writes the table aligned, numbers right-aligned.
func (t *Table) Print(w io.Writer) {
	widths := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		widths[i] = utf8.RuneCountInString(c)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	if t.Title != "" {
		fmt.Fprintf(w, "%s\n", t.Title)
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if numeric(c) {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.Columns)
	sep := make([]string, len(widths))
	for i, n := range widths {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintln(w)
}

// Markdown writes the table as a GitHub-flavoured Markdown table.
func (t *Table) Markdown(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.Columns, " | "))
	seps := make([]string, len(t.Columns))
	for i := range seps {
		seps[i] = "---"
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(seps, " | "))
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

func numeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789.-+e×%", r) {
			return false
		}
	}
	return true
}

// WriteCSV writes the table to dir/<Name>.csv and returns the path.
func (t *Table) WriteCSV(dir string) (string, error) {
	path := filepath.Join(dir, t.Name+".csv")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := csv.NewWriter(f)
	w.Write(t.Columns)
	w.WriteAll(t.Rows)
	if err := w.Error(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// WriteJSON writes v, indented, to dir/name and returns the path.
func WriteJSON(dir, name string, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteAll prints the tables to w and writes each as CSV in dir, and the
// whole result v as JSON to dir/name.json. It returns the files written.
func WriteAll(w io.Writer, dir, name string, v any, tables []*Table) ([]string, error) {
	for _, t := range tables {
		if !t.FileOnly {
			t.Print(w)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, t := range tables {
		p, err := t.WriteCSV(dir)
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	p, err := WriteJSON(dir, name+".json", v)
	if err != nil {
		return files, err
	}
	return append(files, p), nil
}
