"""Provider webhook payloads in the shapes the providers document (Amazon SES through SNS, Postmark,
Mailgun), and the signatures that make them genuine: SNS's RSA signature with a certificate made
here, Mailgun's HMAC, Postmark's basic auth."""

import base64
import datetime
import hashlib
import hmac
import json
import secrets
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

TOPIC = "arn:aws:sns:us-west-2:123456789012:MyTopic"
MAILGUN_KEY = "key-for-tests-0123456789"
POSTMARK_SECRET = "einmal:postmark-password"


def certificate() -> tuple[rsa.RSAPrivateKey, bytes]:
    """A self-signed certificate standing in for SNS's signing certificate: (its key, its PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.us-west-2.amazonaws.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=2))
        .sign(key, hashes.SHA256())
    )
    return key, cert.public_bytes(serialization.Encoding.PEM)


def _mail(message_id: str, source: str = "john@example.com") -> dict:
    return {
        "timestamp": "2016-01-27T14:59:38.237Z",
        "source": source,
        "sourceArn": "arn:aws:ses:us-east-1:888888888888:identity/example.com",
        "sourceIp": "127.0.3.0",
        "sendingAccountId": "123456789012",
        "callerIdentity": "IAM_user_or_role_name",
        "messageId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000",
        "destination": ["jane@example.com", "mary@example.com", "richard@example.com"],
        "headersTruncated": False,
        "headers": [
            {"name": "From", "value": '"John Doe" <john@example.com>'},
            {"name": "To", "value": '"Jane Doe" <jane@example.com>'},
            {"name": "Message-ID", "value": message_id},
            {"name": "Subject", "value": "Hello"},
            {"name": "Date", "value": "Wed, 27 Jan 2016 14:05:45 +0000"},
        ],
        "commonHeaders": {
            "from": ["John Doe <john@example.com>"],
            "date": "Wed, 27 Jan 2016 14:05:45 +0000",
            "to": ["Jane Doe <jane@example.com>"],
            "messageId": message_id,
            "subject": "Hello",
        },
    }


def ses_bounce(
    recipients: list[str],
    *,
    bounce_type: str = "Permanent",
    message_id: str = "custom-message-ID",
    feedback_id: str = "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa068a-000000",
    source: str = "john@example.com",
) -> dict:
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "reportingMTA": "dns; email.example.com",
            "bouncedRecipients": [
                {
                    "emailAddress": r,
                    "status": "5.1.1",
                    "action": "failed",
                    "diagnosticCode": f"smtp; 550 5.1.1 <{r}>... User",
                }
                for r in recipients
            ],
            "bounceSubType": "General",
            "timestamp": "2016-01-27T14:59:38.237Z",
            "feedbackId": feedback_id,
            "remoteMtaIp": "127.0.2.0",
        },
        "mail": _mail(message_id, source),
    }


def ses_complaint(
    recipient: str,
    *,
    message_id: str = "custom-message-ID",
    feedback_id: str = "000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000",
) -> dict:
    return {
        "notificationType": "Complaint",
        "complaint": {
            "userAgent": "AnyCompany Feedback Loop (V0.01)",
            "complainedRecipients": [{"emailAddress": recipient}],
            "complaintFeedbackType": "abuse",
            "arrivalDate": "2016-01-27T14:59:38.237Z",
            "timestamp": "2016-01-27T14:59:38.237Z",
            "feedbackId": feedback_id,
        },
        "mail": _mail(message_id),
    }


def _canonical(message: dict) -> bytes:
    fields = (
        ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
        if message["Type"] == "Notification"
        else ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
    )
    return "".join(f"{name}\n{message[name]}\n" for name in fields if name in message).encode()


def signed(key: rsa.RSAPrivateKey, message: dict, version: str = "1") -> dict:
    message = {
        **message,
        "SignatureVersion": version,
        "SigningCertURL": "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7.pem",
    }
    algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
    message["Signature"] = base64.b64encode(key.sign(_canonical(message), padding.PKCS1v15(), algorithm)).decode()
    return message


def sns_time(at: float | None = None) -> str:
    """An SNS Timestamp: `at` (seconds since the epoch; now when None) as SNS writes it."""
    moment = datetime.datetime.fromtimestamp(time.time() if at is None else at, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def sns_notification(
    key: rsa.RSAPrivateKey,
    notification: dict,
    *,
    version: str = "1",
    message_id: str = "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
    topic: str = TOPIC,
    timestamp: str | None = None,
) -> dict:
    return signed(
        key,
        {
            "Type": "Notification",
            "MessageId": message_id,
            "TopicArn": topic,
            "Message": json.dumps(notification),
            "Timestamp": timestamp or sns_time(),
            "UnsubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=x",
        },
        version,
    )


def sns_subscription(key: rsa.RSAPrivateKey) -> dict:
    return signed(
        key,
        {
            "Type": "SubscriptionConfirmation",
            "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
            "Token": "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e2",
            "TopicArn": TOPIC,
            "Message": f"You have chosen to subscribe to the topic {TOPIC}.\nTo confirm the subscription, visit the "
            "SubscribeURL included in this message.",
            "SubscribeURL": f"https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription&TopicArn={TOPIC}&Token=2336",
            "Timestamp": sns_time(),
        },
    )


def postmark_bounce(
    email: str, *, type_: str = "HardBounce", id_: int = 4323372036854775807, content: str | None = None
) -> dict:
    record = {
        "RecordType": "Bounce",
        "MessageStream": "outbound",
        "ID": id_,
        "Type": type_,
        "TypeCode": 1,
        "Name": "Hard bounce",
        "Tag": "Test",
        "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
        "Metadata": {"a_key": "a_value", "b_key": "b_value"},
        "ServerID": 23,
        "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
        "Details": "Test bounce details",
        "Email": email,
        "From": "sender@example.com",
        "BouncedAt": "2019-11-05T16:33:54.9070259Z",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": True,
        "Subject": "Test subject",
        "Content": content or "<Full dump of bounce>",
    }
    return record


def postmark_complaint(email: str, *, id_: int = 42) -> dict:
    return {
        "RecordType": "SpamComplaint",
        "MessageStream": "outbound",
        "ID": id_,
        "Type": "SpamComplaint",
        "TypeCode": 512,
        "Name": "Spam complaint",
        "Tag": "Test",
        "MessageID": "00000000-0000-0000-0000-000000000000",
        "Metadata": {"a_key": "a_value"},
        "ServerID": 1234,
        "Description": "",
        "Details": "Test spam complaint details",
        "Email": email,
        "From": "sender@example.com",
        "BouncedAt": "2019-11-05T16:33:54.9070259Z",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": False,
        "Subject": "Test subject",
        "Content": "<Abuse report dump>",
    }


def postmark_auth(secret: str = POSTMARK_SECRET) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(secret.encode()).decode()}


def mailgun_event(
    recipient: str,
    *,
    event: str = "failed",
    severity: str | None = "permanent",
    id_: str = "G9Bn5sl1TC6nu79C8C0bwg",
    message_id: str = "20130503182626.18666.16540@sandbox.mailgun.org",
    key: str = MAILGUN_KEY,
    timestamp: int | None = None,
) -> dict:
    data = {
        "event": event,
        "id": id_,
        "timestamp": 1521233195.375624,
        "log-level": "error",
        "reason": "bounce",
        "envelope": {"sender": "bob@sandbox.mailgun.org", "transport": "smtp", "targets": recipient},
        "flags": {"is-routed": False, "is-authenticated": True, "is-system-test": False, "is-test-mode": False},
        "recipient-domain": recipient.rpartition("@")[2],
        "recipient": recipient,
        "message": {
            "headers": {
                "to": f"Alice <{recipient}>",
                "message-id": message_id,
                "from": "Bob <bob@sandbox.mailgun.org>",
                "subject": "Test permanent_fail webhook",
            },
            "attachments": [],
            "size": 111,
        },
        "delivery-status": {
            "attempt-no": 1,
            "message": "",
            "code": 550,
            "enhanced-code": "5.1.1",
            "description": "Not delivering to previously bounced address",
            "session-seconds": 0,
        },
        "user-variables": {"my_var_1": "Mailgun Variable #1"},
    }
    if severity is not None:
        data["severity"] = severity
    return {"signature": mailgun_signature(key, timestamp), "event-data": data}


def mailgun_signature(key: str = MAILGUN_KEY, timestamp: int | None = None, token: str | None = None) -> dict:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    token = token or secrets.token_hex(25)  # Mailgun's: 50 random characters, new for every request
    return {
        "timestamp": stamp,
        "token": token,
        "signature": hmac.new(key.encode(), (stamp + token).encode(), hashlib.sha256).hexdigest(),
    }
