// ENUM index 0: the "error value" a session without strict mode stores for a value that is not a
// member. It reads as '' (like a member '' would) and no strict session can write it back, so it is
// carried as this marker, never as '': written as '', it became the member '' of ENUM('', ...) on
// the peer, or was refused there as not a member, with the wrong cause named.
export class EnumErrorValue {
  /** Logs and the conflict log show what it is. */
  toJSON(): string {
    return '(ENUM error value, index 0)';
  }
}

export const ENUM_ERROR_VALUE = new EnumErrorValue();
