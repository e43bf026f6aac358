package cursor_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/internal/cursor"
)

func codec(t testing.TB, key string) *cursor.Codec {
	c, err := cursor.New([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOpenTakesBackOnlyItsOwn(t *testing.T) {
	c := codec(t, "fleet-key-0123456789")
	jobs := cursor.Listing{Kind: "jobs", Params: []string{"team/", ""}}
	s := c.Seal(jobs, "00017/team%2Fa")
	if got, err := c.Open(jobs, s); err != nil || got != "00017/team%2Fa" {
		t.Fatalf("Open(Seal(x)) = %q, %v", got, err)
	}
	flip := func(s string, i int) string {
		b, _ := base64.RawURLEncoding.DecodeString(s)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for _, tc := range []struct {
		name    string
		listing cursor.Listing
		s       string
		want    error
	}{
		{"raw position", jobs, "00017/team%2Fa", cursor.ErrMalformed},
		{"not base64", jobs, "!!!", cursor.ErrMalformed},
		{"truncated", jobs, s[:10], cursor.ErrMalformed},
		{"another version", jobs, flip(s, 0), cursor.ErrMalformed},
		{"position changed", jobs, flip(s, 12), cursor.ErrForeign},
		{"mac changed", jobs, flip(s, len(s)*3/4-1), cursor.ErrForeign},
		{"another fleet's", jobs, codec(t, "other-fleet-0123456789").Seal(jobs, "00017/team%2Fa"), cursor.ErrForeign},
		{"another kind", cursor.Listing{Kind: "runs", Params: []string{"team/", ""}}, s, cursor.ErrOtherListing},
		{"another prefix", cursor.Listing{Kind: "jobs", Params: []string{"team/x", ""}}, s, cursor.ErrOtherListing},
		{"another filter", cursor.Listing{Kind: "jobs", Params: []string{"team/", "true"}}, s, cursor.ErrOtherListing},
		{"parameters shifted", cursor.Listing{Kind: "jobs", Params: []string{"team/"}}, s, cursor.ErrOtherListing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Open(tc.listing, tc.s)
			if !errors.Is(err, tc.want) || !errors.Is(err, cursor.ErrInvalid) {
				t.Fatalf("Open = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
	if got, err := c.Open(jobs, ""); got != "" || err != nil {
		t.Fatalf(`Open("") = %q, %v; want the first page`, got, err)
	}
	if c.Seal(jobs, "") != "" {
		t.Fatal(`Seal("") is not "": the last page has no next cursor`)
	}
	if _, err := cursor.New([]byte("short")); err == nil {
		t.Fatal("a short key was taken")
	}
}

// Any position round-trips, within MaxBytes; any other listing refuses
// it.
func TestSealOpenProperty(t *testing.T) {
	c := codec(t, strings.Repeat("k", 32))
	rapid.Check(t, func(t *rapid.T) {
		pos := rapid.StringN(1, 632, 632*4).Draw(t, "pos")
		if len(pos) > 632 {
			pos = pos[:632]
		}
		l := cursor.Listing{Kind: rapid.SampledFrom([]string{"jobs", "runs", "tokens"}).Draw(t, "kind"), Params: rapid.SliceOfN(rapid.String(), 0, 3).Draw(t, "params")}
		s := c.Seal(l, pos)
		if len(s) > cursor.MaxBytes(len(pos)) {
			t.Fatalf("a cursor of %d bytes for a position of %d, over MaxBytes %d", len(s), len(pos), cursor.MaxBytes(len(pos)))
		}
		if got, err := c.Open(l, s); err != nil || got != pos {
			t.Fatalf("Open(Seal(%q)) = %q, %v", pos, got, err)
		}
		other := cursor.Listing{Kind: l.Kind, Params: append(append([]string{}, l.Params...), "x")}
		if _, err := c.Open(other, s); !errors.Is(err, cursor.ErrOtherListing) {
			t.Fatalf("Open for another listing: %v", err)
		}
	})
}
