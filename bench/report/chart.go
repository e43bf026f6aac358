package report

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a line chart, or one group of bars.
type Series struct {
	Name string
	X    []float64 // ignored by bar charts
	Y    []float64
}

// Chart is a line or grouped bar chart.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Bars draws grouped bars, one group per category, one bar per series.
	Bars       bool
	Categories []string
	// LogX and LogY use logarithmic axes (line charts).
	LogX, LogY bool
	// HLines are horizontal reference lines (for example the store limit).
	HLines []Series // Y[0] is the level; Name the legend
}

// WritePNG draws the chart to dir/name (a .png) at 16×10 cm and returns
// the path.
func (c Chart) WritePNG(dir, name string) (string, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if c.Bars {
		if err := c.bars(p); err != nil {
			return "", err
		}
	} else if err := c.lines(p); err != nil {
		return "", err
	}
	if !c.LogY {
		p.Y.Min = 0
		p.Y.Max *= 1.25 // room for the legend above the data
	}
	path := filepath.Join(dir, name)
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
		return "", fmt.Errorf("report: chart %s: %w", name, err)
	}
	return path, nil
}

func (c Chart) lines(p *plot.Plot) error {
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if c.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	minX, maxX := 0.0, 1.0
	first := true
	for i, s := range c.Series {
		pts := make(plotter.XYs, 0, len(s.Y))
		for j := range s.Y {
			if (c.LogY && s.Y[j] <= 0) || (c.LogX && s.X[j] <= 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: s.X[j], Y: s.Y[j]})
			if first || s.X[j] < minX {
				minX = s.X[j]
			}
			if first || s.X[j] > maxX {
				maxX = s.X[j]
			}
			first = false
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(0)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
	}
	for i, h := range c.HLines {
		l, err := plotter.NewLine(plotter.XYs{{X: minX, Y: h.Y[0]}, {X: maxX, Y: h.Y[0]}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: uint8(80 + 40*i)}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(h.Name, l)
	}
	return nil
}

func (c Chart) bars(p *plot.Plot) error {
	n := len(c.Series)
	w := vg.Points(float64(min(20, 160/max(1, n*len(c.Categories)))))
	for i, s := range c.Series {
		b, err := plotter.NewBarChart(plotter.Values(s.Y), w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.NominalX(c.Categories...)
	return nil
}
