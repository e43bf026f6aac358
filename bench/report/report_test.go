package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTablePrintAndFiles(t *testing.T) {
	tb := &Table{Name: "t", Title: "numbers", Columns: []string{"name", "value"}}
	tb.Add("a", 1.5)
	tb.Add("bb", 1234.0)
	var b strings.Builder
	tb.Print(&b)
	want := "numbers\nname  value\n----  -----\na      1.50\nbb     1234\n\n"
	if got := b.String(); got != want {
		t.Errorf("Print:\ngot  %q\nwant %q", got, want)
	}
	dir := t.TempDir()
	files, err := WriteAll(&strings.Builder{}, dir, "all", map[string]int{"x": 1}, []*Table{tb})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("wrote %v, want a CSV and a JSON file", files)
	}
	f, err := os.Open(filepath.Join(dir, "t.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 3 || rows[2][1] != "1234" {
		t.Errorf("CSV rows %v (%v), want header and 2 rows", rows, err)
	}
}

func TestCharts(t *testing.T) {
	dir := t.TempDir()
	line := Chart{Title: "l", Series: []Series{{Name: "s", X: []float64{1, 2, 4}, Y: []float64{1, 3, 2}}}, HLines: []Series{{Name: "limit", Y: []float64{5}}}}
	bars := Chart{Title: "b", Bars: true, Categories: []string{"x", "y"}, Series: []Series{{Name: "p50", Y: []float64{1, 2}}, {Name: "p99", Y: []float64{3, 4}}}}
	logy := Chart{Title: "log", LogY: true, Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{0, 100}}}}
	for name, c := range map[string]Chart{"line.png": line, "bars.png": bars, "log.png": logy} {
		p, err := c.WritePNG(dir, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
			t.Errorf("%s is not a PNG (%v)", name, err)
		}
	}
}
