package standby_test

import (
	"os"
	"testing"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }
