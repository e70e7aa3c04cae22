// wink-porter2-stemmer ships no type declarations: one function, a lower-case word in, its stem out.
declare module 'wink-porter2-stemmer' {
  export default function stem(word: string): string;
}
