package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/auth"
)

func TestRoleAllows(t *testing.T) {
	// want[role] lists the access levels the role has, besides anonymous.
	want := map[api.Role][]api.Access{
		api.RoleViewer:   {api.AccessRead, api.AccessMembers},
		api.RoleWorker:   {api.AccessMembers, api.AccessWork},
		api.RoleOperator: {api.AccessRead, api.AccessMembers, api.AccessWrite},
		api.RoleAdmin:    {api.AccessRead, api.AccessMembers, api.AccessWrite, api.AccessWork, api.AccessAdmin},
		"":               nil,
		"root":           nil,
	}
	levels := []api.Access{api.AccessRead, api.AccessMembers, api.AccessWrite, api.AccessWork, api.AccessAdmin}
	for role, has := range want {
		if !role.Allows(api.AccessAnonymous) || !role.Allows(api.AccessStatic) {
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
	billingOp := auth.Principal{ID: "b1", Role: api.RoleOperator, Prefix: "billing/"}
	viewer := auth.Principal{ID: "v1", Role: api.RoleViewer}
	admin := auth.Principal{ID: "a1", Role: api.RoleAdmin}
	tests := []struct {
		name   string
		p      auth.Principal
		a      api.Access
		job    string
		hasJob bool
		want   error
		msg    string
	}{
		{"scoped operator writes its job", billingOp, api.AccessWrite, "billing/invoices", true, nil, ""},
		{"scoped operator writes a job outside", billingOp, api.AccessWrite, "payroll/run", true, auth.ErrForbidden, `limited to jobs whose ID starts with "billing/"`},
		{"scoped operator: the prefix itself", billingOp, api.AccessWrite, "billing/", true, nil, ""},
		{"scoped operator: a shorter ID", billingOp, api.AccessWrite, "billing", true, auth.ErrForbidden, "limited"},
		{"scoped operator lists", billingOp, api.AccessRead, "", false, nil, ""},
		{"scoped operator drains", billingOp, api.AccessAdmin, "", false, auth.ErrForbidden, "needs role admin"},
		{"viewer writes", viewer, api.AccessWrite, "x", true, auth.ErrForbidden, "needs role operator or admin"},
		{"viewer reads any job", viewer, api.AccessRead, "payroll/run", true, nil, ""},
		{"viewer polls", viewer, api.AccessWork, "", false, auth.ErrForbidden, "needs role worker or admin"},
		{"admin everything", admin, api.AccessAdmin, "", false, nil, ""},
		{"admin any job", admin, api.AccessWrite, "payroll/run", true, nil, ""},
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
		role := rapid.SampledFrom(append(api.Roles(), "", "Admin")).Draw(t, "role")
		prefix := ""
		if role != api.RoleAdmin {
			prefix = rapid.StringMatching(`[a-c/]{0,3}`).Draw(t, "prefix")
		}
		p := auth.Principal{ID: "x", Role: role, Prefix: prefix}
		a := api.Access(rapid.IntRange(0, int(api.AccessStatic)).Draw(t, "access"))
		job := rapid.StringMatching(`[a-c/]{0,5}`).Draw(t, "job")
		hasJob := rapid.Bool().Draw(t, "hasJob")
		err := auth.Authorize(p, a, job, hasJob)
		if err != nil && !errors.Is(err, auth.ErrForbidden) {
			t.Fatalf("error %v does not match ErrForbidden", err)
		}
		if err == nil {
			if a == api.AccessAdmin && role != api.RoleAdmin {
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
		if role.Allows(api.AccessWork) && role.Allows(api.AccessRead) && role != api.RoleAdmin {
			t.Fatalf("%s may both run the worker protocol and read jobs", role)
		}
		if a.Anonymous() && (err == nil) != (!hasJob || strings.HasPrefix(job, prefix)) {
			t.Fatalf("anonymous access decided %v for job %q, prefix %q", err, job, prefix)
		}
	})
}
