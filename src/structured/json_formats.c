/*
 * json_formats.c — regexes for the JSON Schema `format` values we enforce
 * (over the decoded string). Formats the spec defines but we cannot check
 * exactly are reported; formats the spec does not define are annotations.
 */
#include "structured/json_formats.h"

#include <string.h>

#define D2 "[0-9]{2}"
#define YEAR "[0-9]{4}"
/* leap years: divisible by 4, not by 100 unless by 400 */
#define LEAP "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
#define MD_ANY "(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8])"
#define DATE "(" YEAR "-(" MD_ANY ")|" LEAP "-02-29)"
/* leap seconds (:60) are refused: whether one is valid depends on the offset */
#define TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define DUR_T "T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)"
#define DURATION "P(([0-9]+Y([0-9]+M([0-9]+D)?)?|[0-9]+M([0-9]+D)?|[0-9]+D)(" DUR_T ")?|" DUR_T "|[0-9]+W)"
#define OCT "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define IPV4 OCT "\\." OCT "\\." OCT "\\." OCT
#define H16 "[0-9A-Fa-f]{1,4}"
#define LS32 "(" H16 ":" H16 "|" IPV4 ")"
#define IPV6                                                                                                  \
    "((" H16 ":){6}" LS32 "|::(" H16 ":){5}" LS32 "|(" H16 ")?::(" H16 ":){4}" LS32 "|((" H16 ":){0,1}" H16  \
    ")?::(" H16 ":){3}" LS32 "|((" H16 ":){0,2}" H16 ")?::(" H16 ":){2}" LS32 "|((" H16 ":){0,3}" H16        \
    ")?::" H16 ":" LS32 "|((" H16 ":){0,4}" H16 ")?::" LS32 "|((" H16 ":){0,5}" H16 ")?::" H16 "|((" H16     \
    ":){0,6}" H16 ")?::)"
#define LABEL "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define HOSTNAME LABEL "(\\." LABEL ")*"
#define ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
#define EMAIL ATEXT "+(\\." ATEXT "+)*@(" HOSTNAME "|\\[" IPV4 "\\])"
#define UUID "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
#define PCT "%[0-9A-Fa-f]{2}"
#define UNRES "[A-Za-z0-9._~-]"
#define SUBD "[!$&'()*+,;=]"
#define PCHAR "(" UNRES "|" PCT "|" SUBD "|[:@])"
#define SCHEME "[A-Za-z][A-Za-z0-9+.-]*"
#define USERINFO "(" UNRES "|" PCT "|" SUBD "|:)*"
#define REGNAME "(" UNRES "|" PCT "|" SUBD ")*"
#define HOST "(\\[" IPV6 "\\]|" IPV4 "|" REGNAME ")"
#define AUTH "(" USERINFO "@)?" HOST "(:[0-9]*)?"
#define PATH_ABEMPTY "(/" PCHAR "*)*"
#define PATH_ABS "/(" PCHAR "+(/" PCHAR "*)*)?"
#define PATH_ROOTLESS PCHAR "+(/" PCHAR "*)*"
#define PATH_NOSCHEME "(" UNRES "|" PCT "|" SUBD "|@)+(/" PCHAR "*)*"
#define QUERY "(\\?(" PCHAR "|[/?])*)?"
#define FRAG "(#(" PCHAR "|[/?])*)?"
#define HIER "(//" AUTH PATH_ABEMPTY "|" PATH_ABS "|" PATH_ROOTLESS "|)"
#define URI SCHEME ":" HIER QUERY FRAG
#define RELREF "(//" AUTH PATH_ABEMPTY "|" PATH_ABS "|" PATH_NOSCHEME "|)" QUERY FRAG
#define JPTR "(/([^~/]|~[01])*)*"

static const struct {
    const char *name;
    const char *re;
} k_formats[] = {
    {"date", DATE},
    {"time", TIME},
    {"date-time", DATE "[Tt]" TIME},
    {"duration", DURATION},
    {"ipv4", IPV4},
    {"ipv6", IPV6},
    {"hostname", HOSTNAME},
    {"email", EMAIL},
    {"uuid", UUID},
    {"uri", URI},
    {"uri-reference", "(" URI "|" RELREF ")"},
    {"json-pointer", JPTR},
    {"relative-json-pointer", "(0|[1-9][0-9]*)(#|" JPTR ")"},
};

/* Defined by the JSON Schema spec (2020-12 / draft-07) but not enforced here. */
static const char *k_unsupported[] = {"idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "regex", NULL};

int so_format_regex(const char *name, const char **re, int *max_len) {
    *max_len = -1;
    for (size_t i = 0; i < sizeof k_formats / sizeof k_formats[0]; i++)
        if (!strcmp(name, k_formats[i].name)) {
            *re = k_formats[i].re;
            if (!strcmp(name, "hostname")) *max_len = 253;
            return 1;
        }
    for (int i = 0; k_unsupported[i]; i++)
        if (!strcmp(name, k_unsupported[i])) return -1;
    return 0;
}

int so_format_exclude(const char *name, const char **re) {
    /* RFC 5891 4.2.3.1: hyphens in the 3rd and 4th positions mark A-labels
     * (punycode), whose validity needs IDNA tables: refused. */
    if (!strcmp(name, "hostname") || !strcmp(name, "email")) {
        *re = !strcmp(name, "hostname") ? "^[A-Za-z0-9]{2}--|\\.[A-Za-z0-9]{2}--" : "[@.][A-Za-z0-9]{2}--";
        return 1;
    }
    *re = NULL;
    return 0;
}
