package privacy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// piiCase is a sentence with one piece of personal data of a kind.
type piiCase struct {
	text string
	pii  string
	kind Kind
}

// corpus: 60 sentences with personal data, English and Chinese.
var piiCorpus = []piiCase{
	{"my email is alice.smith@example.com, reply there", "alice.smith@example.com", Email},
	{"请发到 zhang.wei@qq.com 谢谢", "zhang.wei@qq.com", Email},
	{"Contact: bob+orders@mail.co.uk", "bob+orders@mail.co.uk", Email},
	{"邮箱：li_na2024@163.com", "li_na2024@163.com", Email},
	{"send the invoice to finance@acme-corp.io please", "finance@acme-corp.io", Email},
	{"我的邮箱是wangfang@sina.cn", "wangfang@sina.cn", Email},
	{"CC j.doe@university.edu on it", "j.doe@university.edu", Email},
	{"support ticket from chen.jie@alibaba-inc.com", "chen.jie@alibaba-inc.com", Email},
	{"我的手机号是13812345678", "13812345678", CNMobile},
	{"电话：139 1234 5678，白天打", "139 1234 5678", CNMobile},
	{"call me on +86 138-0013-8000", "+86 138-0013-8000", CNMobile},
	{"联系方式15900001111", "15900001111", CNMobile},
	{"手机18611112222，微信同号", "18611112222", CNMobile},
	{"my Chinese number is 17712345678", "17712345678", CNMobile},
	{"紧急联系人电话 +8613512345678", "+8613512345678", CNMobile},
	{"她的号码是19987654321", "19987654321", CNMobile},
	{"call me at +1 415 555 0132 tomorrow", "+1 415 555 0132", Phone},
	{"UK office: +44 20 7946 0958", "+44 20 7946 0958", Phone},
	{"my number is (212) 555-0147", "(212) 555-0147", Phone},
	{"reach me at 650-555-0199", "650-555-0199", Phone},
	{"公司座机 010-62345678", "010-62345678", Phone},
	{"深圳办公室0755-8765432", "0755-8765432", Phone},
	{"Berlin: +49 30 12345678", "+49 30 12345678", Phone},
	{"Tokyo number +81-3-1234-5678", "+81-3-1234-5678", Phone},
	{"身份证号11010519491231002X", "11010519491231002X", CNID},
	{"my ID is 440304199001011233", "440304199001011233", CNID},
	{"身份证：310115198511204566，请核对", "310115198511204566", CNID},
	{"证件号码510108200002297892", "510108200002297892", CNID},
	{"ID card 320583197806153327 attached", "320583197806153327", CNID},
	{"身份证号码是110101199003077125", "110101199003077125", CNID},
	{"他的身份证330106199512120016丢了", "330106199512120016", CNID},
	{"card number 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111", Card},
	{"我的银行卡6217000123456789019", "6217000123456789019", Card},
	{"Mastercard 5500-0000-0000-0004", "5500-0000-0000-0004", Card},
	{"amex 378282246310005 please charge", "378282246310005", Card},
	{"卡号：6222021234567890128", "6222021234567890128", Card},
	{"discover 6011000990139424", "6011000990139424", Card},
	{"visa 4012888888881881 expired", "4012888888881881", Card},
	{"信用卡5555555555554444还款", "5555555555554444", Card},
	{"JCB 3530111333300000", "3530111333300000", Card},
	{"diners 30569309025904", "30569309025904", Card},
	{"passport number E12345678", "E12345678", Passport},
	{"护照号码G87654321", "G87654321", Passport},
	{"Passport No. K1234567, expires 2030", "K1234567", Passport},
	{"我的护照是EA1234567", "EA1234567", Passport},
	{"passport: 123456789 (US)", "123456789", Passport},
	{"护照号：P9876543", "P9876543", Passport},
	{"IBAN GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 32", IBAN},
	{"pay to DE89370400440532013000", "DE89370400440532013000", IBAN},
	{"account NL91ABNA0417164300 please", "NL91ABNA0417164300", IBAN},
	{"IBAN: FR14 2004 1010 0505 0001 3M02 606", "FR14 2004 1010 0505 0001 3M02 606", IBAN},
	{"收款账户 ES9121000418450200051332", "ES9121000418450200051332", IBAN},
	{"email me: mike@example.org tonight", "mike@example.org", Email},
	{"客户王先生，电话13055556666，地址北京", "13055556666", CNMobile},
	{"my wife's phone +33 1 23 45 67 89", "+33 1 23 45 67 89", Phone},
	{"verify ID 51010820000229789 2 no wait 510108200002297892", "510108200002297892", CNID},
	{"备用邮箱 backup.acct@outlook.com", "backup.acct@outlook.com", Email},
	{"Singapore +65 6123 4567", "+65 6123 4567", Phone},
	{"card 4000 0566 5566 5556 for the refund", "4000 0566 5566 5556", Card},
	{"电话：(021) 5555-1234 is not it, mobile 13300001234", "13300001234", CNMobile},
}

// lookalikes: numbers that are not personal data and must stay.
var lookalikes = []string{
	"我的订单12345没收到",
	"预算不超过8000元",
	"这次旅行预算调整到10000元",
	"价格 ¥12,999，打八折",
	"金额 15000.00 元已退款",
	"We upgraded to Flink 1.17 last week",
	"Python 3.10.2 and Go 1.26",
	"version v2.3.4-beta is out",
	"the meeting is on 2024-05-01 at 13:45",
	"2024年5月1日下午3点",
	"order #20240501123 shipped",
	"tracking number SF1234567890123",
	"room 1203, floor 12",
	"flight CA1234 departs 08:30",
	"车次G1234，二等座",
	"邮编100080",
	"IP 192.168.1.1 blocked",
	"ISBN 978-3-16-148410-0",
	"1,234,567 users signed up",
	"timestamp 1714550400",
	"Q3 revenue grew 12.5%",
	"温度36.5度",
	"the SKU is AB-1234-XY",
	"run 3 x 10 km at 5:30 pace",
	"invoice INV-2024-0042",
	"订单号 202405011234567 已发货",
	"quantity 500, unit price 8.99",
	"工单编号 T20240501001",
	"Kafka 3.6.1 with 12 partitions",
	"call me at 3pm",
}

func TestRedactionCorpus(t *testing.T) {
	require.GreaterOrEqual(t, len(piiCorpus), 50)
	r := NewRedactor()
	tp, fn, fp, kindOK := 0, 0, 0, 0
	for _, c := range piiCorpus {
		require.Contains(t, c.text, c.pii, "corpus case is malformed")
		out, ms := r.Redact(c.text)
		if strings.Contains(out, c.pii) || !strings.Contains(out, Placeholder(c.kind)) && len(ms) == 0 {
			fn++
			t.Logf("MISSED  %-9s %q → %q", c.kind, c.text, out)
			continue
		}
		tp++
		hit := false
		for _, m := range ms {
			overlaps := strings.Contains(c.pii, m.Text) || strings.Contains(m.Text, c.pii)
			if overlaps {
				hit = true
				if m.Kind == c.kind {
					kindOK++
				} else {
					t.Logf("KIND    %q found as %s, want %s", c.pii, m.Kind, c.kind)
				}
			} else {
				fp++
				t.Logf("EXTRA   %s %q in %q", m.Kind, m.Text, c.text)
			}
		}
		if !hit {
			t.Logf("PARTIAL %q → %q", c.text, out)
		}
	}
	for _, s := range lookalikes {
		out, ms := r.Redact(s)
		for _, m := range ms {
			fp++
			t.Logf("FALSE+  %s %q in %q → %q", m.Kind, m.Text, s, out)
		}
	}
	precision := float64(tp) / float64(tp+fp)
	recall := float64(tp) / float64(tp+fn)
	summary := fmt.Sprintf("redaction corpus: %d PII strings (%d kinds), %d lookalikes: recall %.3f (%d/%d), precision %.3f (%d true, %d false positives), kind correct %d/%d",
		len(piiCorpus), len(AllKinds), len(lookalikes), recall, tp, tp+fn, precision, tp, fp, kindOK, tp)
	t.Log(summary)
	assert.GreaterOrEqual(t, recall, 0.95)
	assert.GreaterOrEqual(t, precision, 0.95)
}

func TestRedactKindsAndPlaceholders(t *testing.T) {
	out, ms := NewRedactor(Email).Redact("mail a@b.io or call 13812345678")
	assert.Equal(t, "mail [EMAIL] or call 13812345678", out)
	require.Len(t, ms, 1)
	out, _ = NewRedactor().Redact("我的手机号是13812345678，身份证11010519491231002X")
	assert.Equal(t, "我的手机号是[CN_MOBILE]，身份证[CN_ID]", out)
	// A wrong checksum is not an ID; a number failing Luhn is not a card.
	out, _ = NewRedactor().Redact("11010519491231002Y 4111111111111112")
	assert.Equal(t, "11010519491231002Y 4111111111111112", out)
	kinds, err := ParseKinds("email, cn_mobile")
	require.NoError(t, err)
	assert.Equal(t, []Kind{Email, CNMobile}, kinds)
	_, err = ParseKinds("email,ssn")
	assert.ErrorContains(t, err, "unknown PII kind")
}
