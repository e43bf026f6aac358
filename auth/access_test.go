package auth_test

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/auth"
)

func TestRoleAllows(t *testing.T) {
	// want[role] lists the access levels the role has, besides anonymous.
	want := map[auth.Role][]auth.Access{
		auth.RoleViewer:   {auth.AccessRead, auth.AccessMembers},
		auth.RoleWorker:   {auth.AccessMembers, auth.AccessWork},
		auth.RoleOperator: {auth.AccessRead, auth.AccessMembers, auth.AccessWrite},
		auth.RoleAdmin:    {auth.AccessRead, auth.AccessMembers, auth.AccessWrite, auth.AccessWork, auth.AccessAdmin},
		"":                nil,
		"root":            nil,
	}
	levels := []auth.Access{auth.AccessRead, auth.AccessMembers, auth.AccessWrite, auth.AccessWork, auth.AccessAdmin}
	for role, has := range want {
		if !role.Allows(auth.AccessAnonymous) || !role.Allows(auth.AccessStatic) {
			t.Errorf("role %q: anonymous or static access refused", role)
		}
		for _, a := range levels {
			got := role.Allows(a)
			exp := false
			for _, h := range has {
				exp = exp || h == a
			}
			if got != exp {
				t.Errorf("role %q, access %s: got %v, want %v", role, a, got, exp)
			}
		}
	}
}

func TestAuthorize(t *testing.T) {
	billingOp := auth.Principal{ID: "b1", Role: auth.RoleOperator, Prefix: "billing/"}
	viewer := auth.Principal{ID: "v1", Role: auth.RoleViewer}
	admin := auth.Principal{ID: "a1", Role: auth.RoleAdmin}
	tests := []struct {
		name   string
		p      auth.Principal
		a      auth.Access
		job    string
		hasJob bool
		want   error
		msg    string
	}{
		{"scoped operator writes its job", billingOp, auth.AccessWrite, "billing/invoices", true, nil, ""},
		{"scoped operator writes a job outside", billingOp, auth.AccessWrite, "payroll/run", true, auth.ErrForbidden, `limited to jobs whose ID starts with "billing/"`},
		{"scoped operator: the prefix itself", billingOp, auth.AccessWrite, "billing/", true, nil, ""},
		{"scoped operator: a shorter ID", billingOp, auth.AccessWrite, "billing", true, auth.ErrForbidden, "limited"},
		{"scoped operator lists", billingOp, auth.AccessRead, "", false, nil, ""},
		{"scoped operator drains", billingOp, auth.AccessAdmin, "", false, auth.ErrForbidden, "needs role admin"},
		{"viewer writes", viewer, auth.AccessWrite, "x", true, auth.ErrForbidden, "needs role operator or admin"},
		{"viewer reads any job", viewer, auth.AccessRead, "payroll/run", true, nil, ""},
		{"viewer polls", viewer, auth.AccessWork, "", false, auth.ErrForbidden, "needs role worker or admin"},
		{"admin everything", admin, auth.AccessAdmin, "", false, nil, ""},
		{"admin any job", admin, auth.AccessWrite, "payroll/run", true, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := auth.Authorize(tt.p, tt.a, tt.job, tt.hasJob)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not say %q", err, tt.msg)
			}
		})
	}
}

// TestAuthorizeProperties checks the decision's laws over random
// principals and job IDs: nobody but admin reaches admin routes or both
// jobs and the worker protocol; a job-scoped request is never allowed
// outside the prefix; and granting is closed under extending the job ID.
func TestAuthorizeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		role := rapid.SampledFrom(append(auth.Roles(), "", "Admin")).Draw(t, "role")
		prefix := ""
		if role != auth.RoleAdmin {
			prefix = rapid.StringMatching(`[a-c/]{0,3}`).Draw(t, "prefix")
		}
		p := auth.Principal{ID: "x", Role: role, Prefix: prefix}
		a := auth.Access(rapid.IntRange(0, int(auth.AccessStatic)).Draw(t, "access"))
		job := rapid.StringMatching(`[a-c/]{0,5}`).Draw(t, "job")
		hasJob := rapid.Bool().Draw(t, "hasJob")
		err := auth.Authorize(p, a, job, hasJob)
		if err != nil && !errors.Is(err, auth.ErrForbidden) {
			t.Fatalf("error %v does not match ErrForbidden", err)
		}
		if err == nil {
			if a == auth.AccessAdmin && role != auth.RoleAdmin {
				t.Fatalf("%s reached an admin route", role)
			}
			if hasJob && !strings.HasPrefix(job, prefix) {
				t.Fatalf("job %q allowed outside prefix %q", job, prefix)
			}
			if hasJob && auth.Authorize(p, a, job+rapid.StringMatching(`[a-c/]{0,3}`).Draw(t, "suffix"), true) != nil {
				t.Fatalf("an extension of allowed job %q is refused", job)
			}
		}
		if !a.Anonymous() && !role.Valid() && err == nil {
			t.Fatalf("unknown role %q allowed %s", role, a)
		}
		if role.Allows(auth.AccessWork) && role.Allows(auth.AccessRead) && role != auth.RoleAdmin {
			t.Fatalf("%s may both run the worker protocol and read jobs", role)
		}
		if a.Anonymous() && (err == nil) != (!hasJob || strings.HasPrefix(job, prefix)) {
			t.Fatalf("anonymous access decided %v for job %q, prefix %q", err, job, prefix)
		}
	})
}
