//! LDAPResult and result codes (RFC 4511 section 4.1.9 and appendix A).

use std::fmt;

/// An LDAP resultCode. A newtype rather than an enum so that codes this
/// crate does not know (other RFCs, vendor extensions) survive a round trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResultCode(pub u32);

macro_rules! result_codes {
    ($($name:ident = $value:literal, $text:literal;)*) => {
        impl ResultCode {
            $(
                #[doc = concat!("`", $text, "` (", stringify!($value), ")")]
                pub const $name: ResultCode = ResultCode($value);
            )*

            /// The RFC 4511 name, e.g. `noSuchObject`; `None` for unknown codes.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some($text),)*
                    _ => None,
                }
            }
        }
    };
}

result_codes! {
    SUCCESS = 0, "success";
    OPERATIONS_ERROR = 1, "operationsError";
    PROTOCOL_ERROR = 2, "protocolError";
    TIME_LIMIT_EXCEEDED = 3, "timeLimitExceeded";
    SIZE_LIMIT_EXCEEDED = 4, "sizeLimitExceeded";
    COMPARE_FALSE = 5, "compareFalse";
    COMPARE_TRUE = 6, "compareTrue";
    AUTH_METHOD_NOT_SUPPORTED = 7, "authMethodNotSupported";
    STRONGER_AUTH_REQUIRED = 8, "strongerAuthRequired";
    REFERRAL = 10, "referral";
    ADMIN_LIMIT_EXCEEDED = 11, "adminLimitExceeded";
    UNAVAILABLE_CRITICAL_EXTENSION = 12, "unavailableCriticalExtension";
    CONFIDENTIALITY_REQUIRED = 13, "confidentialityRequired";
    SASL_BIND_IN_PROGRESS = 14, "saslBindInProgress";
    NO_SUCH_ATTRIBUTE = 16, "noSuchAttribute";
    UNDEFINED_ATTRIBUTE_TYPE = 17, "undefinedAttributeType";
    INAPPROPRIATE_MATCHING = 18, "inappropriateMatching";
    CONSTRAINT_VIOLATION = 19, "constraintViolation";
    ATTRIBUTE_OR_VALUE_EXISTS = 20, "attributeOrValueExists";
    INVALID_ATTRIBUTE_SYNTAX = 21, "invalidAttributeSyntax";
    NO_SUCH_OBJECT = 32, "noSuchObject";
    ALIAS_PROBLEM = 33, "aliasProblem";
    INVALID_DN_SYNTAX = 34, "invalidDNSyntax";
    ALIAS_DEREFERENCING_PROBLEM = 36, "aliasDereferencingProblem";
    INAPPROPRIATE_AUTHENTICATION = 48, "inappropriateAuthentication";
    INVALID_CREDENTIALS = 49, "invalidCredentials";
    INSUFFICIENT_ACCESS_RIGHTS = 50, "insufficientAccessRights";
    BUSY = 51, "busy";
    UNAVAILABLE = 52, "unavailable";
    UNWILLING_TO_PERFORM = 53, "unwillingToPerform";
    LOOP_DETECT = 54, "loopDetect";
    SORT_CONTROL_MISSING = 60, "sortControlMissing";
    OFFSET_RANGE_ERROR = 61, "offsetRangeError";
    NAMING_VIOLATION = 64, "namingViolation";
    OBJECT_CLASS_VIOLATION = 65, "objectClassViolation";
    NOT_ALLOWED_ON_NON_LEAF = 66, "notAllowedOnNonLeaf";
    NOT_ALLOWED_ON_RDN = 67, "notAllowedOnRDN";
    ENTRY_ALREADY_EXISTS = 68, "entryAlreadyExists";
    OBJECT_CLASS_MODS_PROHIBITED = 69, "objectClassModsProhibited";
    AFFECTS_MULTIPLE_DSAS = 71, "affectsMultipleDSAs";
    VIRTUAL_LIST_VIEW_ERROR = 76, "virtualListViewError";
    OTHER = 80, "other";
    CANCELED = 118, "canceled";
    NO_SUCH_OPERATION = 119, "noSuchOperation";
    TOO_LATE = 120, "tooLate";
    CANNOT_CANCEL = 121, "cannotCancel";
    ASSERTION_FAILED = 122, "assertionFailed";
    AUTHORIZATION_DENIED = 123, "authorizationDenied";
    // OpenLDAP's code (in its private range, 0x4121) for a transaction
    // identifier it does not know; RFC 5805 names no code of its own.
    TXN_ID_INVALID = 16673, "txnIdInvalid";
    // RFC 4533 section 2.6: the client must start its content
    // synchronization again from the beginning (or with its cookie).
    SYNC_REFRESH_REQUIRED = 4096, "e-syncRefreshRequired";
}

impl fmt::Debug for ResultCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}({})", self.0),
            None => write!(f, "ResultCode({})", self.0),
        }
    }
}

impl fmt::Display for ResultCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
