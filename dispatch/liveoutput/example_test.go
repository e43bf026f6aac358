package liveoutput_test

import (
	"fmt"

	"github.com/jobfleet/jobfleet/dispatch/liveoutput"
)

// A follower reads what an attempt wrote, then its end.
func ExampleTable_Follow() {
	t := liveoutput.New(liveoutput.Config{})
	k := liveoutput.Key{Run: "backup@20261201T020000Z", Item: liveoutput.NoItem, Attempt: 1}
	t.Write(k, 0, []byte("dumping…\n"))
	f := t.Follow(k)
	defer f.Close()
	t.Write(k, int64(len("dumping…\n")), []byte("done\n"))
	t.End(k)
	for {
		<-f.Wake()
		data, _, ended := f.Read()
		fmt.Print(string(data))
		if ended {
			break
		}
	}
	// Output:
	// dumping…
	// done
}
