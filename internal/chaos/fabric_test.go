package chaos

import (
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    LinkRule
		u, v float64
		want verdict
	}{
		{"no rule", LinkRule{}, 0, 0.9, verdict{}},
		{"down", LinkRule{Down: true}, 0.99, 0, verdict{drop: true}},
		{"lost", LinkRule{Loss: 0.2}, 0.19, 0, verdict{drop: true}},
		{"not lost", LinkRule{Loss: 0.2}, 0.2, 0, verdict{}},
		{"delayed with jitter", LinkRule{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}, 0, 0.5, verdict{delay: 125 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := judge(tt.r, tt.u, tt.v); got != tt.want {
				t.Errorf("judge(%+v, %v, %v) = %+v, want %+v", tt.r, tt.u, tt.v, got, tt.want)
			}
		})
	}
}

func TestPacketLink(t *testing.T) {
	ipv4 := func(src, dst [4]byte) []byte {
		p := make([]byte, 20)
		p[0] = 0x45
		copy(p[12:16], src[:])
		copy(p[16:20], dst[:])
		return p
	}
	for _, tt := range []struct {
		name string
		pkt  []byte
		want link
		ok   bool
	}{
		{"between hosts", ipv4([4]byte{10, 213, 0, 21}, [4]byte{10, 213, 0, 11}), link{21, 11}, true},
		{"to outside the hosts", ipv4([4]byte{10, 213, 0, 21}, [4]byte{10, 213, 1, 11}), link{}, false},
		{"from outside", ipv4([4]byte{192, 0, 2, 2}, [4]byte{10, 213, 0, 11}), link{}, false},
		{"IPv6", append([]byte{0x60}, make([]byte, 39)...), link{}, false},
		{"short", []byte{0x45, 0}, link{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := packetLink(tt.pkt)
			if got != tt.want || ok != tt.ok {
				t.Errorf("packetLink = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
