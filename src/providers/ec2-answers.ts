/**
 * What EC2 answers, as the ec2 provider reads it: AWS error codes as provider error kinds, and the
 * raw answer checked before the SDK parses it.
 */
import type { EC2Client } from '@aws-sdk/client-ec2';
import { ProviderError, type ProviderErrorKind } from './provider.js';
import type { CallDeadline } from './deadline.js';

/** AWS error codes as the provisioner acts on them; codes not listed go by their HTTP status. */
export const EC2_ERROR_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  AuthFailure: 'auth',
  UnauthorizedOperation: 'auth',
  InvalidClientTokenId: 'auth',
  SignatureDoesNotMatch: 'auth',
  OptInRequired: 'auth',
  Blocked: 'auth',
  PendingVerification: 'auth',
  InstanceLimitExceeded: 'quota',
  VcpuLimitExceeded: 'quota',
  MaxSpotInstanceCountExceeded: 'quota',
  SpotMaxPriceTooLow: 'capacity',
  UnfulfillableCapacity: 'capacity',
  InsufficientReservedInstanceCapacity: 'capacity',
  InsufficientInstanceCapacity: 'capacity',
  InsufficientCapacity: 'capacity',
  InsufficientHostCapacity: 'capacity',
  InsufficientFreeAddressesInSubnet: 'capacity',
  RequestLimitExceeded: 'unavailable',
  Throttling: 'unavailable',
  ThrottlingException: 'unavailable',
  InternalError: 'unavailable',
  ServiceUnavailable: 'unavailable',
  Unavailable: 'unavailable',
  RequestTimeout: 'timeout',
  RequestTimeoutException: 'timeout',
  InvalidParameterValue: 'invalid',
  InvalidParameterCombination: 'invalid',
  InvalidParameter: 'invalid',
  MissingParameter: 'invalid',
  UnknownParameter: 'invalid',
  IdempotentParameterMismatch: 'invalid',
  Unsupported: 'invalid',
};

/** The provider error kind of an AWS error code (and HTTP status, when there is one). */
export function kindOf(code: string, status: number | undefined): ProviderErrorKind {
  const known = EC2_ERROR_KINDS[code];
  if (known) return known;
  // InvalidAMIID.NotFound, InvalidAMIID.Malformed, InvalidSubnetID.NotFound, InvalidGroup.NotFound…
  if (code.startsWith('Invalid')) return 'invalid';
  if (status === 401 || status === 403) return 'auth';
  if (status === undefined || status >= 500 || status === 429) return 'unavailable';
  return 'invalid';
}

interface AwsError extends Error {
  $metadata?: { httpStatusCode?: number };
  Code?: string;
  code?: string;
}

interface RawResponse {
  statusCode?: number;
  body?: unknown;
}

// An EC2 answer is `<ActionResponse xmlns=…>` or, for an error, `<Response><Errors>…`.
const EC2_XML_ROOT = /^\s*(?:<\?xml[^>]*\?>\s*)?<(?:[A-Za-z]+Response|Response)[\s>]/;

/**
 * Reads the raw answer before the SDK parses it, and refuses one that is not EC2's XML: the SDK
 * reads `<html>…</html>` from a proxy as an empty DescribeInstances, which would make every
 * instance of the pool look gone.
 */
async function checkAnswerIsEc2Xml(response: RawResponse): Promise<void> {
  const chunks: Buffer[] = [];
  const body = response.body;
  if (body instanceof Uint8Array) chunks.push(Buffer.from(body));
  else if (body && typeof (body as AsyncIterable<Buffer>)[Symbol.asyncIterator] === 'function') {
    for await (const chunk of body as AsyncIterable<Buffer | string>) chunks.push(Buffer.from(chunk));
  }
  const bytes = Buffer.concat(chunks);
  if (!EC2_XML_ROOT.test(bytes.subarray(0, 512).toString('utf8'))) {
    throw new ProviderError(
      'unavailable',
      `malformed answer: HTTP ${response.statusCode} with a body that is not EC2's XML`,
      'malformed_answer',
    );
  }
  response.body = bytes;
}

type StackMiddleware = Parameters<EC2Client['middlewareStack']['addRelativeTo']>[0];
// A deserialize-step middleware; the SDK's middleware types live in a package of its own, not ours.
export const answerCheck = ((next: (args: unknown) => Promise<{ response: unknown }>) => async (args: unknown) => {
  const result = await next(args);
  await checkAnswerIsEc2Xml(result.response as RawResponse);
  return result;
}) as unknown as StackMiddleware;

/** An SDK failure as a provider error, its message blanked of the account. */
export function errorOf(
  what: string,
  err: unknown,
  deadline: CallDeadline,
  redact: (text: string) => string,
): ProviderError {
  if (err instanceof ProviderError)
    return err.providerCode === 'malformed_answer'
      ? new ProviderError(err.kind, `${what}: ${err.message}`, err.providerCode)
      : err;
  const e = err as AwsError;
  if (deadline.signal.aborted) return deadline.failure(what);
  const status = e.$metadata?.httpStatusCode;
  if (status === undefined) {
    // Never reached EC2 (connection refused, DNS).
    const code = e.code ?? (e.name === 'Error' ? 'network' : e.name);
    return new ProviderError(
      'unavailable',
      `${what}: EC2 could not be reached (${redact(e.message).slice(0, 300)})`,
      code,
    );
  }
  const code = e.Code ?? e.name;
  return new ProviderError(kindOf(code, status), `${what}: ${redact(e.message).slice(0, 500)} (${code})`, code);
}
